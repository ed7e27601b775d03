// What every space-to-depth kernel (s2d.cu on Hopper, s2d_mma_sync.cu elsewhere) does
// before its warps part into roles: the ring's barriers, the K order table, the bias, and
// B packed in the wgmma block layout -- which ldmatrix reads as mma.sync's B fragments too.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../../conv1_geometry.h"
#include "../arch/mbarrier.cuh"
#include "../arch/smem.cuh"
#include "../common/dtype.cuh"
#include "../common/operand_modes.cuh"
#include "../common/weight_packing.cuh"
#include "../common/weight_scale.cuh"
#include "plan.h"
#include "ring.cuh"

namespace alexconv {
namespace cuda {
namespace s2d {

// Every thread of the CTA takes part; the call ends in a CTA barrier. kNT: the n-tiles
// of output channels the CTA computes (a split kernel's group, from p's first). `raw`: scratch
// for one input channel's raw weights (kNT * 8 x 121), `warp_largest` for the weight
// scale (one word per warp); neither is read after the call. float32 multiplied as fp16:
// `weight_scale` is what B was multiplied by. Returns the rounding that the producers'
// bf16x3 split uses: toward zero where a weight is infinite (see mma::Round).
// kConsumers: the consumer threads that release each slot.
template <class Mode, DType T, int kSlots, int kNT = mma::kNTiles, int kConsumers = kConsumerThreads>
__device__ __forceinline__ Round prepare(const Problem& p, Ring<kSlots>& ring, uint8_t* k_taps, float* bias,
                                         uint4* b_all, typename Mode::Raw* raw, uint32_t* warp_largest,
                                         WeightScale& weight_scale, int tid) {
  if (tid == 0) {
    for (int s = 0; s < kSlots; ++s) {
      barrier_init(&ring.full[s], kProducerThreads);
      barrier_init(&ring.empty[s], kConsumers);
    }
    for (int r = 0; r < 2; ++r) barrier_init(&ring.landed[r], 1);
    barrier_init_fence();
  }
  if (tid < kTapSteps * 16) k_taps[tid] = step_tap(tid / 16, tid % 16);
  if (tid < kOutChannels) {
    const typename Mode::Raw* b = static_cast<const typename Mode::Raw*>(p.bias);
    bias[tid] = b && tid < p.out_channels ? to_float<T>(b[tid * p.bias_stride]) : 0.f;
  }
  // float32 multiplied as fp16: B holds the weights times a power of two (its
  // barrier publishes the ring, k_taps and the bias).
  if constexpr (std::is_same_v<Mode, mma::Float32AsHalf>) {
    weight_scale = half_weight_scale<kNT * 8>(p, warp_largest, tid);
  }
  // pack_weights' first barrier publishes the ring, k_taps and the bias.
  const bool infinite_weight = pack_weights<Mode, true, kTapSteps, kNT>(p, k_taps, b_all, raw, tid, weight_scale.scale);
  // B was written through the generic proxy; the tensor cores read it through the async proxy.
  fence_async_proxy();
  // Infinite weights make inputs split toward zero (see mma::Round). Ends in a CTA barrier.
  const bool any_infinite = __syncthreads_or(infinite_weight);
  // Every warp records the result before the roles part: with the result used by the
  // producers only, ptxas may give each role its own copy of the barrier (BAR.RED),
  // the shape of build that hung (scripts/device/check_barriers.sh).
  if (tid % 32 == 0) ring.infinite_weights = any_infinite;
  return any_infinite ? Round::kTowardZero : Round::kNearest;
}

}  // namespace s2d
}  // namespace cuda
}  // namespace alexconv
