// The CPU micro-kernel's interface. Plain C++ with no torch headers: its source is
// compiled once per instruction set (CMakeLists.txt), and a header with inline
// functions would let the linker keep an AVX2 copy for a baseline caller.
#pragma once

#include <cstdint>

#include "../conv1_geometry.h"

namespace alexconv::cpu {

// The output's element type. 16-bit outputs are rounded from the float accumulators to
// nearest even, as c10::BFloat16 and c10::Half round.
enum class OutType : int32_t { kFloat32, kBFloat16, kFloat16 };

// A block of output rows x columns of one image, with its input already in float.
struct Band {
  // The input the block reads, zero-padded, [3][rows][row_pitch]: the window of
  // the block's output pixel (y, x) starts at image + 4 * y * row_pitch + 4 * x.
  const float* image;
  int64_t plane_pitch, row_pitch;
  int64_t out_rows, out_cols;
  // Channel c of pixel (y, x) goes to
  // out[c * channel_stride + y * row_stride + x * col_stride], elements of out_type.
  void* out;
  OutType out_type;
  int64_t channel_stride, row_stride, col_stride;
  // Output channels to compute and store (1 to kMaxOutChannels).
  int64_t channels;
  // Store max(v, 0) as at::relu does: v < 0 ? 0 : v (NaN and -0.0 pass unchanged), applied
  // to the rounded value for 16-bit outputs (what F.relu of the unfused op gives: -0.0 where a
  // small negative value rounds to zero).
  bool relu;
  // bfloat16 inputs on Kernel::run_band_pairs, instead of image: the input's bits as pairs of
  // rows, the operands of bfloat16 dot products (two taps a lane). pairs, [3][rows / 2 + 1]
  // [row_pitch]: staged rows 2k (low half) and 2k + 1 (high half; zero past the last row).
  // tails, [3][out_rows][row_pitch]: row 4y + 10, output row y's window's eleventh, with zero
  // beside it (pairing it with row 4y + 11, a real input, would make 0 * Inf a NaN).
  const uint32_t* pairs = nullptr;
  const uint32_t* tails = nullptr;
  int64_t pair_plane_pitch = 0, tail_plane_pitch = 0;
};

// Taps per output channel as pairs: 3 channels x 6 row pairs (the sixth a row with zero) x 11
// columns. Pair weights are packed [block][kPairTaps][channel_block], each a 32-bit lane with
// row 2k's tap in the low half and row 2k + 1's (zero for k = 5) in the high half.
constexpr int64_t kRowPairs = (kKernel + 1) / 2;
constexpr int64_t kPairTaps = kInChannels * kRowPairs * kKernel;

struct Kernel {
  const char* isa;
  // Output channels per micro-tile; weights are packed
  // [ceil(channels / channel_block)][kTaps][channel_block], taps in (ci, r, s) order, the
  // last block's channels past `channels` zero.
  int64_t channel_block;
  // bias: ceil(channels / channel_block) * channel_block floats (zeros where the call has
  // none, and past `channels`).
  void (*run_band)(const Band& band, const float* packed_weights, const float* bias);
  // Packs contiguous float weights ([channels][kTaps]) as above, or is null where the caller
  // packs them itself.
  void (*pack_weights)(const float* weights, int64_t channels, float* packed);
  // dst[i] = float(src[i]) for n float16 values (F16C / AVX-512F vcvtph2ps), or null where the
  // build has no conversion instruction.
  void (*widen_float16)(const uint16_t* src, int64_t n, float* dst);
  // d0[i], d1[i], d2[i] = src[3i], src[3i + 1], src[3i + 2] for i < n (a channels-last row into
  // its three planes), or null where the caller does it itself.
  void (*split3)(const float* src, int64_t n, float* d0, float* d1, float* d2);
  // bfloat16 calls with the input and weights as pairs of taps (Band::pairs, kPairTaps), through
  // AVX512-BF16's vdpbf16ps, or null where the build has none. Each output is one chain from the
  // bias: per pair, the high half's product added first, then the low half's, each product
  // exact and each sum rounded to float (subnormal operands and sums flushed to zero: the
  // caller keeps bands of tiny magnitudes on run_band).
  void (*run_band_pairs)(const Band& band, const uint32_t* packed_pairs, const float* bias);
};

// SSE2 on x86-64, NEON on AArch64: whatever the compiler's baseline is.
Kernel baseline_kernel();
// AVX2 + FMA + F16C, built with -mavx2 -mfma -mf16c on x86-64 only (ALEXCONV_CPU_HAS_AVX2);
// call only where the CPU has all three.
Kernel avx2_kernel();
// AVX-512 F + BW + DQ + VL (ATen's AVX512 level) with AVX2, FMA and F16C, on x86-64 only
// (ALEXCONV_CPU_HAS_AVX512); call only where the CPU has them all.
Kernel avx512_kernel();
// avx512 with AVX512-BF16 (-mavx512bf16, ALEXCONV_CPU_HAS_AVX512_BF16): run_band_pairs too.
Kernel avx512_bf16_kernel();
// avx512 with run_band_pairs's dot products as two FMAs each (no AVX512-BF16 needed; the same
// results but for subnormals): the pair path's staging and packing, checked on any AVX-512 CPU.
Kernel avx512_bf16_emulated_kernel();

}  // namespace alexconv::cpu
