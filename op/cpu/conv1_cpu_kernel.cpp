// The CPU micro-kernel, compiled once per instruction set: CMakeLists.txt names
// the set in ALEXCONV_CPU_ISA (baseline, avx2) and passes its compiler flags,
// and the vector width follows from those flags.
//
// Output channels run along the vector lanes, so each tap's weights are two
// vector loads and each input value is one broadcast that feeds two FMAs. Six
// pixels x two vectors of channels stay in registers for the whole 363-tap
// reduction. The six pixels need not share a row: only a band's last tile
// computes padding (copies of its last pixel).
#include <cstring>
#include <type_traits>

#include "../conv1_geometry.h"
#include "conv1_cpu_kernel.h"

#if !defined(ALEXCONV_CPU_ISA)
#error "compile this file through CMakeLists.txt, which sets ALEXCONV_CPU_ISA"
#endif
#define ALEXCONV_CONCAT_(a, b) a##b
#define ALEXCONV_CONCAT(a, b) ALEXCONV_CONCAT_(a, b)
#define ALEXCONV_STRING_(a) #a
#define ALEXCONV_STRING(a) ALEXCONV_STRING_(a)

namespace alexconv::cpu {
namespace {

#if defined(__AVX__)
constexpr int kLanes = 8;
#else
constexpr int kLanes = 4;  // SSE2, NEON
#endif
constexpr int kTile = static_cast<int>(kTilePixels);
constexpr int64_t kChannelBlock = 2 * kLanes;

// GCC/Clang vector extensions: the compiler maps them onto this build's ISA.
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));

inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// at::relu's rule, v < 0 ? 0 : v (NaN and -0.0 compare false and pass unchanged), as a lane
// mask: a branch on each value's sign would mispredict half the time (+20% time measured).
inline Vec relu_lanes(Vec v) {
  const Vec zero = {};
  const auto negative = v < zero;  // all ones in the lanes to clear
  using Mask = std::remove_const_t<decltype(negative)>;
  return (Vec)((Mask)v & ~negative);
}

// One micro-tile: kTile pixels (window[j] is pixel j's 11x11x3 window) and
// kChannelBlock channels (weights w, packed [tap][channel]). Pixels from `pixels`
// on are duplicates that pad the last tile of a band, and channels from `channels` on
// pad the last channel block (zero weights): neither is stored.
void multiply_tile(const float* const window[kTile], int pixels, int channels, bool relu,
                   const float* w, const float* bias, int64_t plane_pitch, int64_t row_pitch,
                   float* out, int64_t channel_stride, const int64_t out_pixel[kTile]) {
  const Vec bias_lo = load(bias), bias_hi = load(bias + kLanes);
  Vec lo[kTile], hi[kTile];
  // Unrolled whatever the optimisation level: a loop over lo[j] would put the
  // accumulators on the stack.
#pragma GCC unroll 6
  for (int j = 0; j < kTile; ++j) {
    lo[j] = bias_lo;
    hi[j] = bias_hi;
  }
  for (int64_t ci = 0; ci < kInChannels; ++ci) {
    for (int64_t r = 0; r < kKernel; ++r) {
      const int64_t row = ci * plane_pitch + r * row_pitch;
#pragma GCC unroll 11
      for (int64_t s = 0; s < kKernel; ++s) {
        const Vec w_lo = load(w), w_hi = load(w + kLanes);
        w += kChannelBlock;
#pragma GCC unroll 6
        for (int j = 0; j < kTile; ++j) {
          const float x = window[j][row + s];
          lo[j] += w_lo * x;
          hi[j] += w_hi * x;
        }
      }
    }
  }
  if (relu) {
#pragma GCC unroll 6
    for (int j = 0; j < kTile; ++j) {
      lo[j] = relu_lanes(lo[j]);
      hi[j] = relu_lanes(hi[j]);
    }
  }
#pragma GCC unroll 6
  for (int j = 0; j < kTile; ++j) {
    if (j >= pixels) break;
    for (int l = 0; l < kLanes && l < channels; ++l) {
      out[l * channel_stride + out_pixel[j]] = lo[j][l];
    }
    for (int l = 0; l < kLanes && l + kLanes < channels; ++l) {
      out[(l + kLanes) * channel_stride + out_pixel[j]] = hi[j][l];
    }
  }
}

void run_band(const Band& band, const float* packed_weights, const float* bias) {
  const int64_t pixels = band.out_rows * band.out_cols;
  for (int64_t c0 = 0; c0 < band.channels; c0 += kChannelBlock) {
    const int channels =
        static_cast<int>(band.channels - c0 < kChannelBlock ? band.channels - c0 : kChannelBlock);
    // This block's weights, [kTaps][kChannelBlock], stay in L1 across the band.
    const float* w = packed_weights + c0 * kTaps;
    for (int64_t p0 = 0; p0 < pixels; p0 += kTile) {
      const int count = static_cast<int>(pixels - p0 < kTile ? pixels - p0 : kTile);
      const float* window[kTile];
      int64_t out_pixel[kTile];
      for (int j = 0; j < kTile; ++j) {
        const int64_t p = p0 + (j < count ? j : count - 1);
        const int64_t y = p / band.out_cols, x = p % band.out_cols;
        window[j] = band.image + kStride * (y * band.row_pitch + x);
        out_pixel[j] = y * band.row_stride + x * band.col_stride;
      }
      multiply_tile(window, count, channels, band.relu, w, bias + c0, band.plane_pitch,
                    band.row_pitch, band.out + c0 * band.channel_stride, band.channel_stride,
                    out_pixel);
    }
  }
}

}  // namespace

Kernel ALEXCONV_CONCAT(ALEXCONV_CPU_ISA, _kernel)() {
  return Kernel{ALEXCONV_STRING(ALEXCONV_CPU_ISA), kChannelBlock, &run_band};
}

}  // namespace alexconv::cpu
