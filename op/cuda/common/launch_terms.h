// The words every kernel family's plan and kernels share: operand modes, fits and stagings
// (launch_plan.h). Plain C++: host planners and device code include it.
#pragma once

#include "../kernel_api.h"

namespace alexconv {
namespace cuda {

// How the tensor cores multiply the call's operands. The one mapping from (dtype, allow_tf32)
// is operand_mode below.
enum class OperandMode {
  kFloat16,
  kBFloat16,
  kTf32,           // float32 with allow_tf32, TF32 words
  kFloat32AsHalf,  // float32 with allow_tf32, rounded to float16 words (TF32's mantissa)
  kBf16x3,         // float32 accurate: x = hi + lo in bf16, three products
};

// float32 with allow_tf32 multiplies float16 words wherever a family's layout has no room
// for TF32 words (`tf32_words` false): the space-to-depth kernels always, the register
// gather in its Halves fit.
constexpr OperandMode operand_mode(DType dtype, bool allow_tf32, bool tf32_words) {
  switch (dtype) {
    case DType::kFloat16: return OperandMode::kFloat16;
    case DType::kBFloat16: return OperandMode::kBFloat16;
    case DType::kFloat32: break;
  }
  if (!allow_tf32) return OperandMode::kBf16x3;
  return tf32_words ? OperandMode::kTf32 : OperandMode::kFloat32AsHalf;
}

// How a family fits a GPU's shared memory: the CTAs that share a tile's 96 output channels,
// each holding its group's weights (Whole: one CTA holds all 96).
enum class Fit { kWhole = 1, kHalves = 2, kThirds = 3, kQuarters = 4 };
constexpr int groups_of(Fit fit) { return int(fit); }
constexpr const char* fit_name(Fit fit) {
  return fit == Fit::kWhole ? "Whole" : fit == Fit::kHalves ? "Halves" : fit == Fit::kThirds ? "Thirds" : "Quarters";
}

// How the producer warps bring a (tile, input channel) window into shared memory.
enum class Staging {
  kTma,         // one TMA box per window (Hopper)
  kCopy16,      // cp.async in 16-byte units
  kCopy4,       // cp.async in 4-byte units
  kSpans,       // bulk copies of the window's row spans (s2d, rows not 16-byte aligned)
  kPixelSpans,  // one bulk copy of a channels_last tile's pixels, three channels at once (s2d)
  kLoads,       // element loads through registers
  kLoads16,     // 16-byte loads through registers (float32 converted to float16 words)
  kPairs,       // column-pair loads through registers (portable s2d)
};
constexpr const char* staging_name(Staging s) {
  switch (s) {
    case Staging::kTma: return "tma";
    case Staging::kCopy16: return "copy16";
    case Staging::kCopy4: return "copy4";
    case Staging::kSpans: return "spans";
    case Staging::kPixelSpans: return "pixel_spans";
    case Staging::kLoads: return "loads";
    case Staging::kLoads16: return "loads16";
    case Staging::kPairs: return "pairs";
  }
  return "?";
}

}  // namespace cuda
}  // namespace alexconv
