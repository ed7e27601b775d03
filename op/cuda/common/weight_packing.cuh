// Packing the weights (B) into shared memory in an MMA engine's operand layout,
// for both implicit-GEMM kernels. A kernel describes its K order by a table:
// k_taps[step * 16 + col] is the tap (ky * 11 + kx; 121 and up: a zero weight)
// that k index `col` of a step multiplies, for each of kSteps steps per input channel.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../../conv1_geometry.h"
#include "../arch/wgmma.cuh"
#include "../kernel_api.h"
#include "operand_modes.cuh"
#include "warp_roles.h"

namespace alexconv {
namespace cuda {

using mma::kTapsPerChannel;

// Modes that multiply float32 as float16 (mma::Float32AsHalf) pack their weights
// times a power of two; they say so with a member kScalesWeights = true.
template <class Mode, class = void>
constexpr bool kScalesWeights = false;
template <class Mode>
constexpr bool kScalesWeights<Mode, std::void_t<decltype(Mode::kScalesWeights)>> = Mode::kScalesWeights;

// B is packed one input channel per round. A round's raw weights (96 x 121) come
// in by independent loads, all in flight together -- each thread owns one tap of
// every fourth output channel, so its addresses step by a constant -- and wait in
// shared memory (scratch the kernel lends: window slots not yet in use). The next
// channel's loads fly while this one is packed: packing word by word from global memory kept
// every CTA waiting in its prologue (docs/perf-notes.md, "Versions", B packed per channel).
constexpr int kTapLanes = 128;                              // threads per output channel, 121 busy
constexpr int kChannelStep = kTileThreads / kTapLanes;      // output channels loaded at once
static_assert(kTileThreads % kTapLanes == 0 && kTapLanes >= kTapsPerChannel,
              "threads cover a channel's taps");

// One thread's share of a round's raw weights, for the first kChannels output channels
// (kernels that compute a group of the channels see the weights from the group's first).
template <class Raw, int kChannels = kOutChannels>
struct WeightRound {
  static constexpr int kRoundLoads = kChannels / kChannelStep;  // loads per thread per round
  static_assert(kChannels % kChannelStep == 0, "threads cover the output channels evenly");
  Raw v[kRoundLoads];
  // Issues the loads for input channel c (any weight strides); they stay in
  // flight until store().
  __device__ void load(const Problem& p, int c, int tid) {
    const int tap = tid % kTapLanes, n = tid / kTapLanes;
    if (tap >= kTapsPerChannel) return;
    const Raw* w = static_cast<const Raw*>(p.weight) + n * p.weight_stride[0] +
                   c * p.weight_stride[1] + (tap / kKernel) * p.weight_stride[2] +
                   (tap % kKernel) * p.weight_stride[3];
    // Channels past the weight's (Problem::out_channels) multiply zeros.
#pragma unroll
    for (int i = 0; i < kRoundLoads; ++i) {
      v[i] = n + i * kChannelStep < p.out_channels ? __ldg(w + i * kChannelStep * p.weight_stride[0]) : Raw(0);
    }
  }
  // Raw weights in shared memory as [output channel][tap].
  __device__ void store(Raw* raw, int tid) const {
    const int tap = tid % kTapLanes, n = tid / kTapLanes;
    if (tap >= kTapsPerChannel) return;
#pragma unroll
    for (int i = 0; i < kRoundLoads; ++i) raw[(n + i * kChannelStep) * kTapsPerChannel + tap] = v[i];
  }
};

// Packs input channel c's B (in the engine's layout) from its raw weights, times
// `scale` where the mode multiplies float32 as float16 (half_weight_scale). Returns
// whether one of them is infinite. kNT n-tiles (8 output channels each) from the first:
// the whole 96, or a split kernel's group (whose blocks are then kNT * 8 channels wide).
template <class Mode, bool kWgmma, int kSteps, int kNT = mma::kNTiles>
__device__ bool pack_channel(const typename Mode::Raw* raw, int c, const uint8_t* k_taps,
                             uint4* b_frag, int tid, float scale = 1.f) {
  using Raw = typename Mode::Raw;
  bool infinite = false;
  // Weight of output channel n at col `col` of a step; 0 at padding taps.
  const auto weight = [&](int step, int n, int col) {
    const int tap = k_taps[step * 16 + col];
    Raw v = tap < kTapsPerChannel ? raw[n * kTapsPerChannel + tap] : Raw(0);
    if constexpr (std::is_same_v<Raw, float>) infinite |= isinf(v);
    if constexpr (kScalesWeights<Mode>) v *= scale;  // a power of two: exact
    return v;
  };
  if constexpr (kWgmma) {
    // A block row (see arch/wgmma.cuh) is 32 bytes = 8 words per output channel,
    // two 16-byte halves; a thread fills one half of a row in every block of the step.
    constexpr int kChannels = kNT * 8, kBlockBytes = kChannels * 32;  // wgmma::kBlockBytes at 96
    constexpr int kHalves = 2, kItems = kSteps * kChannels * kHalves;
    for (int e = tid; e < kItems; e += kTileThreads) {
      const int half = e % kHalves, n = (e / kHalves) % kChannels;
      const int step = e / (kHalves * kChannels);
      const auto w = [&](int n_, int col) { return weight(step, n_, col); };
      uint32_t words[4][Mode::kWgBlocks];
#pragma unroll
      for (int u = 0; u < 4; ++u) Mode::wg_words(w, n, half * 4 + u, words[u]);
      unsigned char* row = reinterpret_cast<unsigned char*>(b_frag) +
                           (c * kSteps + step) * Mode::kWgBlocks * kBlockBytes +
                           wgmma::block_offset(n, 16 * half);
#pragma unroll
      for (int b = 0; b < Mode::kWgBlocks; ++b) {
        *reinterpret_cast<uint4*>(row + b * kBlockBytes) =
            make_uint4(words[0][b], words[1][b], words[2][b], words[3][b]);
      }
    }
  } else {
    constexpr int kChunks = Mode::template kChunksOf<kNT>;
    constexpr int kPerStep = kChunks * 32;
#pragma unroll 2
    for (int e = tid; e < kSteps * kPerStep; e += kTileThreads) {
      const int step = e / kPerStep, chunk = (e / 32) % kChunks, lane = e % 32;
      const auto w = [&](int n, int col) { return weight(step, n, col); };
      b_frag[(c * kSteps + step) * kPerStep + chunk * 32 + lane] =
          Mode::pack_b(w, chunk, lane >> 2, lane & 3);
    }
  }
  return infinite;
}

// Packs every input channel's B into b_frag; `raw` is scratch for one channel's raw
// weights (kNT * 8 x 121). Every thread of the CTA takes part; k_taps must be written
// before the call (its first barrier publishes it). Returns whether this thread saw
// an infinite weight.
template <class Mode, bool kWgmma, int kSteps, int kNT = mma::kNTiles>
__device__ __forceinline__ bool pack_weights(const Problem& p, const uint8_t* k_taps, uint4* b_frag,
                             typename Mode::Raw* raw, int tid, float scale = 1.f) {
  WeightRound<typename Mode::Raw, kNT * 8> weights;
  weights.load(p, 0, tid);
  bool infinite_weight = false;
#pragma unroll 1
  for (int c = 0; c < kInChannels; ++c) {
    weights.store(raw, tid);
    __syncthreads();  // the channel's raw weights (and, first, k_taps) are in place
    if (c + 1 < kInChannels) weights.load(p, c + 1, tid);  // in flight while packing
    infinite_weight |= pack_channel<Mode, kWgmma, kSteps, kNT>(raw, c, k_taps, b_frag, tid, scale);
    __syncthreads();  // every read of the raw weights is done before the next store
  }
  return infinite_weight;
}

}  // namespace cuda
}  // namespace alexconv
