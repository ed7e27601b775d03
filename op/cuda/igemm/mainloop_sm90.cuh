// The wgmma mainloop (sm_90a): one input channel's 8 K steps of a consumer warpgroup,
// B read by the tensor cores from shared memory.
#pragma once

#include <cstdint>

#include "../arch/wgmma.cuh"
#include "a_fragments.cuh"

namespace alexconv {
namespace cuda {
namespace igemm {

// The wgmma version: each step's MMAs run asynchronously while the next step's
// A words are gathered. A fragments alternate between two register sets, and a
// step waits only for the step before it, whose set it will overwrite next.
template <class Mode>
__device__ __forceinline__ void multiply_channel_wgmma(float (&acc)[kMTiles][mma::kNTiles][4],
                                                       const typename Mode::Word* window,
                                                       uint32_t b_channel, const int4* koff,
                                                       const PixelRows& rows, uint32_t padding,
                                                       int lane) {
  const int t = lane & 3;
  StepWords<Mode> cur, nxt;
  load_step<Mode>(cur, window, rows, koff[t], 0);
  int4 k_next = koff[4 + t];
  typename Mode::A a[2][kMTiles];  // [step parity][m-tile]
  const wgmma::Operand weights = wgmma::blocks(b_channel);
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    if (step + 1 < kSteps) {
      load_step<Mode>(nxt, window, rows, k_next, step + 1);
      if (step + 2 < kSteps) k_next = koff[(step + 2) * 4 + t];
    }
    make_step_a<Mode>(a[step & 1], cur, step, padding);
    wgmma::fence();
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      Mode::wg_mma(acc[mt], a[step & 1][mt], weights, step * Mode::kWgBlocks * wgmma::kBlockUnits);
    }
    wgmma::commit();
    wgmma::wait<1>();
    if (step + 1 < kSteps) cur = nxt;
  }
  wgmma::wait<0>();
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) wgmma::fence_accumulators(acc[mt]);
}

}  // namespace igemm
}  // namespace cuda
}  // namespace alexconv
