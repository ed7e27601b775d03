// The mma.sync mainloop (sm_80+): one input channel's 8 K steps of a consumer warp, for
// its kNT n-tiles (8 output channels each).
#pragma once

#include <cstdint>

#include "a_fragments.cuh"

namespace alexconv {
namespace cuda {
namespace igemm {

// acc += A(window) * B(channel) over the channel's 8 steps. The next step's A
// words and the step after's tap offsets are loaded before this step's MMAs, so
// shared-memory latency overlaps tensor-core work.
template <class Mode, int kNT>
__device__ __forceinline__ void multiply_channel(float (&acc)[kMTiles][kNT][4],
                                                 const typename Mode::Word* window,
                                                 const uint4* b_channel, const int4* koff,
                                                 const PixelRows& rows, uint32_t padding,
                                                 int lane) {
  const int t = lane & 3;
  StepWords<Mode> cur, nxt;
  load_step<Mode>(cur, window, rows, koff[t], 0);
  int4 k_next = koff[4 + t];
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    if (step + 1 < kSteps) {
      load_step<Mode>(nxt, window, rows, k_next, step + 1);
      if (step + 2 < kSteps) k_next = koff[(step + 2) * 4 + t];
    }
    typename Mode::A a[kMTiles];
    make_step_a<Mode>(a, cur, step, padding);
    constexpr int kChunks = Mode::template kChunksOf<kNT>;
    const uint4* b_step = b_channel + step * kChunks * 32 + lane;
#pragma unroll
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      const uint4 b = b_step[chunk * 32];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) Mode::mma(acc[mt], chunk, a[mt], b);
    }
    if (step + 1 < kSteps) cur = nxt;
  }
}


}  // namespace igemm
}  // namespace cuda
}  // namespace alexconv
