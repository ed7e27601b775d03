// The power-of-two weight scale of the kernels that multiply float32 as float16 (allow_tf32:
// s2d's mma::Float32AsHalf on Hopper, the register gather's mma::Float32AsHalf on the split fits).
#pragma once

#include <cstdint>

#include "../../conv1_geometry.h"
#include "../kernel_api.h"
#include "warp_roles.h"
#include "weight_packing.cuh"

namespace alexconv {
namespace cuda {

// Float32 weights multiplied as float16 (s2d's mma::Float32AsHalf, igemm's mma::Float32AsHalf) are
// first scaled by the power of two that brings the largest finite magnitude into [2^14, 2^15):
// none overflows float16, and every weight within 2^-24 of the largest stays a float16
// normal (full precision). The accumulators are scaled back by the inverse in the
// epilogue. Inf and NaN weights stay what they are, as in the 16-bit modes.
struct WeightScale {
  float scale = 1.f, inverse = 1.f;
};

// Every thread of the CTA takes part: each loads its share of every channel's
// weights as pack_weights does (WeightRound), the warps' largest magnitudes meet in
// `warp_largest` (one word per warp), and one CTA barrier later every thread works
// out the same scale.
// kChannels: the output channels this CTA packs (a split fit's group, from p.weight's first).
template <int kChannels = int(kOutChannels)>
__device__ WeightScale half_weight_scale(const Problem& p, uint32_t* warp_largest, int tid) {
  uint32_t largest = 0;  // the largest finite |w| as bits (ordered like the magnitudes)
  for (int c = 0; c < kInChannels; ++c) {
    WeightRound<float, kChannels> round{};  // zeros where this thread owns no tap
    round.load(p, c, tid);
#pragma unroll
    for (int i = 0; i < WeightRound<float, kChannels>::kRoundLoads; ++i) {
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
