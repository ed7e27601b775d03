// The register-gather kernel's K steps and tap order, its shared-memory layout
// (packed B, tap offsets, bias, ring barriers, window slots, 16-bit output staging)
// and the ring barriers between its producer and consumer warps.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../conv1_geometry.h"
#include "../arch/wgmma.cuh"
#include "../common/epilogue.cuh"
#include "../common/operand_modes.cuh"
#include "../common/ring.cuh"
#include "tile_plan.h"

namespace alexconv {
namespace cuda {
namespace igemm {

constexpr int kSteps = 8;                    // 128 padded taps per channel / 16
using mma::kTapsPerChannel;
// Window columns start even where the stride and the padding are (plan_igemm takes even
// paddings only).
static_assert(kTapsPerChannel == kKernel * kKernel && kStride % 2 == 0,
              "the paired K order (common/operand_modes.cuh) needs even window columns");


// The tap that col c (a k index, 0..15) of a step multiplies, in the K order of common/operand_modes.cuh.
template <class Mode>
__device__ __forceinline__ int step_tap(int step, int c) {
  return mma::paired_tap(step * 8 + Mode::pair(c), Mode::member(c));
}

// How a kernel of this family fits a GPU's shared memory: every CTA computes kChannels of the
// 96 output channels (the CTAs of grid row blockIdx.y the y-th group), so it holds that much of
// B, beside kStages window slots. Whole: all 96 channels and three slots, 231,552 bytes in
// float32 modes and 153,984 in 16-bit ones (Hopper; A100 in 16 bits). The split fits are the
// portable kernels of GPUs with less: Halves 98,688 bytes in 16 bits (every sm_80+ GPU's 99
// KB) and 157,056 in float32 (A100's 163 KB); Quarters 93,312 bytes in float32 (99 KB).
// Each group stages the same windows: the split trades input traffic (from L2: the groups
// of a tile run side by side) for shared memory.
template <int kGroups_, int kStages_>
struct FitShape {
  static constexpr int kGroups = kGroups_;
  static constexpr int kStages = kStages_;
  static constexpr int kChannels = int(kOutChannels) / kGroups;
  static constexpr int kNTiles = kChannels / 8;
  // Window slots 1 .. kStages - 1 hold a channel's raw weights while B is packed (see
  // prepare_constants); stage 0's window copy is in flight meanwhile.
  static constexpr int kRawSlots = kStages - 1;
  static_assert(kChannels * kGroups == kOutChannels && kNTiles * 8 == kChannels && kStages >= 2,
                "whole n-tiles per group, a ring of two slots or more");
};
using Whole = FitShape<1, kStages>;
using Halves = FitShape<2, kStages>;
using Quarters = FitShape<4, 2>;
constexpr int kRawSlots = Whole::kRawSlots;

// The ring's barriers, one set per window slot: the pipeline's (common/ring.cuh) --
// `full` completes when every producer thread has arrived (the window is ready),
// `empty` when every consumer thread has (the slot may be refilled) -- and `landed`,
// when a TMA copy into the slot has delivered its bytes. Nothing else synchronises
// the two roles, so copies, conversion, MMAs and epilogues of different stages overlap.
// `votes`: for modes that guard float16's range (mma::Float32AsHalf), one byte per producer warp,
// written before it commits a tile's last stage: what its lanes saw of the tile's
// inputs (common/tile_votes.cuh), decoded for the whole tile by TileVotes::exact.
template <int kSlots>
struct RingBarriers : Pipeline<kSlots> {
  uint64_t landed[kSlots];
  uint32_t votes[kSlots];

  __device__ __forceinline__ void wait_landed(const RingPos<kSlots>& pos) {
    barrier_wait(&landed[pos.slot], pos.phase);
  }
};

template <class Mode, class F = Whole>
struct SmemLayout {
  using Word = typename Mode::Word;
  // B in either engine's layout (the two happen to need the same bytes; wgmma kernels
  // are Whole).
  static constexpr size_t kBMmaSync =
      size_t(kInChannels) * kSteps * Mode::template kChunksOf<F::kNTiles> * 32 * sizeof(uint4);
  static constexpr size_t kBWgmma =
      F::kGroups == 1 ? size_t(kInChannels) * kSteps * Mode::kWgBlocks * wgmma::kBlockBytes : 0;
  static constexpr size_t kB = kBMmaSync > kBWgmma ? kBMmaSync : kBWgmma;
  static constexpr size_t kKoffAt = kB;
  static constexpr size_t kBiasAt = kKoffAt + kSteps * 4 * sizeof(int4);
  static constexpr size_t kTapsAt = kBiasAt + kOutChannels * sizeof(float);
  static constexpr size_t kRingAt = kTapsAt + kSteps * 16;
  // TMA copies land at 128-byte aligned addresses: offsets are rounded here, and the
  // dynamic shared memory starts the CTA's window (these kernels have no static
  // shared memory). Declaring it __align__(128) instead changes the wgmma
  // descriptor arithmetic in SASS, so that is left for a build verified on a GPU.
  static constexpr size_t kSlotsAt = (kRingAt + sizeof(RingBarriers<F::kStages>) + 127) / 128 * 128;
  static constexpr size_t kStagedAt = kSlotsAt + F::kStages * size_t(kSlotElems) * sizeof(Word);
  // 16-bit outputs leave through shared memory (see store_tile_staged); float32
  // modes have no room for that beside their two-part weights.
  static constexpr bool kStagedStores = sizeof(typename Mode::Raw) == 2;
  static constexpr size_t kTotal =
      kStagedAt +
      (kStagedStores ? kConsumerWarps / 4 * kStagedElemsOf<F::kNTiles> * sizeof(uint16_t) : 0);
  static_assert(kRingAt % 8 == 0 && kSlotElems * sizeof(Word) % 128 == 0,
                "barriers and slots stay aligned");
};

}  // namespace igemm
}  // namespace cuda
}  // namespace alexconv
