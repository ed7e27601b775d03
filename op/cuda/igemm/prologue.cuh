// The kernel's prologue: B (every input channel, in the engine's layout), the tap
// offset table and the bias, packed into shared memory while the first windows travel.
#pragma once

#include <cstdint>

#include "../../conv1_geometry.h"
#include "../arch/smem.cuh"
#include "../common/dtype.cuh"
#include "../common/weight_packing.cuh"
#include "../common/weight_scale.cuh"
#include "smem_layout.cuh"

namespace alexconv {
namespace cuda {
namespace igemm {

// Packs B (all input channels; the fit's output channels, from p.weight's first), then the
// tap-offset table and the bias, while stage 0's window copies are in flight. `raw` is
// scratch for a channel's raw weights.
// Returns how this launch splits its inputs (toward zero where some weight is
// infinite: see mma::Round) and, for modes that scale their weights (mma::Float32AsHalf), the
// factor that scales the accumulators back.
struct Constants {
  mma::Round round;
  float unscale;
};
template <class Mode, DType T, bool kWgmma, class F>
__device__ Constants prepare_constants(const Problem& p, int pitch, uint4* b_frag, int4* koff,
                                       float* bias, uint8_t* k_taps, typename Mode::Raw* raw,
                                       int tid) {
  using Raw = typename Mode::Raw;
  static_assert(F::kChannels * kTapsPerChannel * sizeof(Raw) <=
                    F::kRawSlots * kSlotElems * sizeof(typename Mode::Word),
                "a channel's raw weights fit in the free window slots");
  // The K order as a table: one shared-memory read per packed weight instead of its arithmetic.
  if (tid < kSteps * 16) k_taps[tid] = uint8_t(step_tap<Mode>(tid / 16, tid % 16));
  // pack_weights' loop, written out: through that function (inlined or not) ptxas
  // splits the __syncthreads_or below into one copy per warp role in 10 of these
  // kernels, the shape of build that hung (check_barriers.sh).
  WeightScale scale;
  if constexpr (kScalesWeights<Mode>) {
    // The bias array is free until the end: the warps' largest magnitudes meet there.
    scale = half_weight_scale<F::kChannels>(p, reinterpret_cast<uint32_t*>(bias), tid);
  }
  WeightRound<Raw, F::kChannels> weights;
  weights.load(p, 0, tid);
  bool infinite_weight = false;
#pragma unroll 1
  for (int c = 0; c < kInChannels; ++c) {
    weights.store(raw, tid);
    __syncthreads();  // the channel's raw weights (and, first, k_taps) are in place
    if (c + 1 < kInChannels) weights.load(p, c + 1, tid);  // in flight while packing
    infinite_weight |= pack_channel<Mode, kWgmma, kSteps, F::kNTiles>(raw, c, k_taps, b_frag, tid, scale.scale);
    __syncthreads();  // every read of the raw weights is done before the next store
  }
  if (tid < kSteps * 4) {
    const int step = tid >> 2, t = tid & 3;
    int off[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int tap = k_taps[step * 16 + Mode::col(t, j)];
      off[j] = tap < kTapsPerChannel ? (tap / kKernel) * pitch + tap % kKernel : 0;
    }
    koff[tid] = make_int4(off[0], off[1], off[2], off[3]);
  }
  if (tid < F::kChannels) {
    const Raw* b = static_cast<const Raw*>(p.bias);
    bias[tid] = b && tid < p.out_channels ? to_float<T>(b[tid * p.bias_stride]) : 0.f;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // B was written through the generic proxy; the tensor cores read it through the async proxy.
  // So were the raw weights in window slots that TMA copies will overwrite.
  fence_async_proxy();
#endif
  const bool infinite = __syncthreads_or(infinite_weight);
  return {infinite ? mma::Round::kTowardZero : mma::Round::kNearest, scale.inverse};
}

}  // namespace igemm
}  // namespace cuda
}  // namespace alexconv
