// Gathering A: each consumer thread's operand words of a K step, read straight from
// the window slot (the im2col exists only in registers), and the A fragments made
// from them, zero at the padding taps. Both mainloops use this.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../common/operand_modes.cuh"
#include "pixel_map.cuh"
#include "smem_layout.cuh"

namespace alexconv {
namespace cuda {
namespace igemm {

// The thread's A words of one step: pixel rows (g, g+8) of its m-tile(s) x 4 tap columns.
template <class Mode>
struct StepWords {
  typename Mode::Word x[kMTiles][2][4];
};

// A pair of adjacent window words, loaded as one (see the K order in common/operand_modes.cuh).
template <class Word>
struct WordPair {
  using Vector = std::conditional_t<sizeof(Word) == 2, uint32_t, uint2>;
  __device__ static void load(const Word* at, Word& first, Word& second) {
    const Vector v = *reinterpret_cast<const Vector*>(at);
    if constexpr (sizeof(Word) == 2) {
      first = Word(v & 0xffffu);
      second = Word(v >> 16);
    } else {
      first = v.x;
      second = v.y;
    }
  }
};

// The step's words: pairs (cols j = 0, 1 and 2, 3 at k4.x and k4.z) in the
// paired steps, tap by tap in the last.
template <class Mode>
__device__ __forceinline__ void load_step(StepWords<Mode>& s, const typename Mode::Word* window,
                                          const PixelRows& rows, int4 k4, int step) {
  const int ko[4] = {k4.x, k4.y, k4.z, k4.w};
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const typename Mode::Word* at = window + rows.window[mt][h];
      if (step < mma::kPairedSteps) {
#pragma unroll
        for (int j = 0; j < 4; j += 2) {
          WordPair<typename Mode::Word>::load(at + ko[j], s.x[mt][h][j], s.x[mt][h][j + 1]);
        }
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) s.x[mt][h][j] = at[ko[j]];
      }
    }
}

// Padding taps sit in the last two steps only. Bit (step - kFirstPaddedStep) * 4 + j
// says the thread's col j is padding there; computed once per thread, so the K
// order's arithmetic stays out of the multiply loop.
constexpr int kFirstPaddedStep = mma::kAdjacentPairs / 8;
template <class Mode>
__device__ uint32_t padding_cols(int t) {
  uint32_t mask = 0;
  for (int step = kFirstPaddedStep; step < kSteps; ++step) {
    for (int j = 0; j < 4; ++j) {
      if (step_tap<Mode>(step, Mode::col(t, j)) >= kTapsPerChannel) {
        mask |= 1u << ((step - kFirstPaddedStep) * 4 + j);
      }
    }
  }
  return mask;
}

// The step's A fragments from its words. A is zeroed at padding taps (B is zero
// there too, but an input of inf would give NaN).
template <class Mode>
__device__ __forceinline__ void make_step_a(typename Mode::A (&a)[kMTiles], StepWords<Mode>& s,
                                            int step, uint32_t padding) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    if (step >= kFirstPaddedStep) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if ((padding >> ((step - kFirstPaddedStep) * 4 + j)) & 1) {
          s.x[mt][0][j] = typename Mode::Word(0);
          s.x[mt][1][j] = typename Mode::Word(0);
        }
      }
    }
    Mode::make_a(a[mt], s.x[mt]);
  }
}


}  // namespace igemm
}  // namespace cuda
}  // namespace alexconv
