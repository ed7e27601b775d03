// float32 with allow_tf32 in the space-to-depth kernel: the operand mode that
// multiplies float32 as float16, and the power-of-two weight scale that keeps the
// weights inside float16's range.
#pragma once

#include <cstdint>

#include "../../conv1_geometry.h"
#include "../common/operand_modes.cuh"
#include "../common/weight_packing.cuh"
#include "../kernel_api.h"

namespace alexconv {
namespace cuda {
namespace mma {

// allow_tf32 in the space-to-depth kernel: float32 inputs and weights rounded to
// float16, whose 10-bit mantissa is TF32's, at twice TF32's tensor rate and with half
// its operand bytes (cuBLAS calls this CUBLAS_COMPUTE_32F_FAST_16F). float16's
// narrow range is the kernel's to guard: weights come scaled by a power of two
// (pack_channel), tiles whose inputs overflow float16 or all sit near its subnormals
// are computed exactly (s2d.cu).
struct HalfOfFloat {
  static constexpr bool kIsBf16 = false;
  static constexpr bool kScalesWeights = true;  // see half_weight_scale
  using Raw = float;
  static constexpr int kWgBlocks = 1;
  template <class W>
  __device__ static void wg_words(const W& w, int n, int unit, uint32_t (&words)[kWgBlocks]) {
    words[0] = pack_half2(w(n, 2 * unit), w(n, 2 * unit + 1));
  }
};

}  // namespace mma

// Float32 weights multiplied as float16 (mma::HalfOfFloat) are first scaled by the
// power of two that brings the largest finite magnitude into [2^14, 2^15): none
// overflows float16, and every weight within 2^-24 of the largest stays a float16
// normal (full precision). The accumulators are scaled back by the inverse in the
// epilogue. Inf and NaN weights stay what they are, as in the 16-bit modes.
struct WeightScale {
  float scale = 1.f, inverse = 1.f;
};

// Every thread of the CTA takes part: each loads its share of every channel's
// weights as pack_weights does (WeightRound), the warps' largest magnitudes meet in
// `warp_largest` (one word per warp), and one CTA barrier later every thread works
// out the same scale.
__device__ inline WeightScale half_weight_scale(const Problem& p, uint32_t* warp_largest, int tid) {
  uint32_t largest = 0;  // the largest finite |w| as bits (ordered like the magnitudes)
  for (int c = 0; c < kInChannels; ++c) {
    WeightRound<float> round{};  // zeros where this thread owns no tap
    round.load(p, c, tid);
#pragma unroll
    for (int i = 0; i < WeightRound<float>::kRoundLoads; ++i) {
      const uint32_t magnitude = __float_as_uint(round.v[i]) & 0x7fffffffu;
      if (magnitude < 0x7f800000u) largest = max(largest, magnitude);
    }
  }
  largest = __reduce_max_sync(0xffffffffu, largest);
  if (tid % 32 == 0) warp_largest[tid / 32] = largest;
  __syncthreads();
  for (int i = 0; i < kTileThreads / 32; ++i) largest = max(largest, warp_largest[i]);
  WeightScale s;
  if (largest == 0) return s;
  // 2^(14 - exponent of the largest), kept within the normal floats both ways.
  const int exponent = max(int(largest >> 23), 1) - 127;
  const int shift = min(max(14 - exponent, -126), 126);
  s.scale = __uint_as_float(uint32_t(127 + shift) << 23);
  s.inverse = __uint_as_float(uint32_t(127 - shift) << 23);
  return s;
}

}  // namespace cuda
}  // namespace alexconv
