// The portable space-to-depth kernel's consumer warps (s2d_mma_sync.cu): per stage, 9 taps
// of mma.sync m16n8k16 whose operands both come from shared memory by ldmatrix -- a tap's A
// for a warp's 16 pixels is 16 consecutive records of each plane (s2d/plan.h), its B the
// tap's block of packed weights -- and per tile the epilogue.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../../conv1_geometry.h"
#include "../arch/mbarrier.cuh"
#include "../arch/mma_sync.cuh"
#include "../common/epilogue.cuh"
#include "../common/operand_modes.cuh"
#include "../common/ring.cuh"
#include "../common/tile_votes.cuh"
#include "../common/weight_packing.cuh"  // kScalesWeights
#include "plan.h"
#include "ring.cuh"

namespace alexconv {
namespace cuda {
namespace s2d {

// A tap's B for kNT n-tiles in the wgmma block layout (common/weight_packing.cuh): 8-channel
// x 16-byte core matrices, an n-tile's two k halves adjacent. Four consecutive core matrices
// (512 bytes) are two n-tiles' B fragments: one ldmatrix, lane l reading row l.
template <int kNT>
constexpr uint32_t kTapBlockBytes = kNT * 8 * 32;
constexpr uint32_t kPairBytes = 512;

template <class Mode>
__device__ __forceinline__ void mma_16816(float (&acc)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (Mode::kIsBf16) {
    mma::bf16_16816(acc, a, b0, b1);
  } else {
    mma::f16_16816(acc, a, b0, b1);  // fp16, and float32 multiplied as fp16
  }
}

// acc += a stage's 9 taps. a_lane: this lane's A row of the first m-tile at tap (0, 0) (lanes
// 0-15 pixels 0-15 of plane 0, lanes 16-31 of plane 1: the m16n8k16 A fragment's four 8x8
// matrices; m-tile mt 16 mt records on); b_lane: this lane's row of the channel's first tap
// block. Tap (dy, dx) reads dy * wv + dx records on. Each B pair serves every m-tile.
template <class Mode, int kNT, int kMT>
__device__ __forceinline__ void multiply_stage(float (&acc)[kMT][kNT][4], uint32_t a_lane, uint32_t b_lane,
                                               uint32_t wv) {
  static_assert(kNT % 2 == 0, "n-tiles in pairs");
#pragma unroll
  for (int dy = 0; dy < kTaps1D; ++dy) {
#pragma unroll
    for (int dx = 0; dx < kTaps1D; ++dx) {
      uint32_t a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        mma::ldmatrix_x4(a[mt], a_lane + (uint32_t(dy) * wv + uint32_t(dx) + 16 * mt) * kRecordBytes);
      }
      const uint32_t b_tap = b_lane + uint32_t(dy * kTaps1D + dx) * kTapBlockBytes<kNT>;
#pragma unroll
      for (int pair = 0; pair < kNT / 2; ++pair) {
        uint32_t b[4];
        mma::ldmatrix_x4(b, b_tap + pair * kPairBytes);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          mma_16816<Mode>(acc[mt][2 * pair], a[mt], b[0], b[1]);
          mma_16816<Mode>(acc[mt][2 * pair + 1], a[mt], b[2], b[3]);
        }
      }
    }
  }
}

// Where warps own two m-tiles (kMT = 2: six warps cover a tile), the twelve consumer warps form
// two teams that take the CTA's tiles in turn, ping-pong: one team's epilogue runs while the
// other multiplies. Their mainloops never overlap -- a team starts one once the other's is done,
// which also keeps every `full` wait unambiguous (the tile before is staged by then) -- and a
// team announces its mainloop done only after the other's epilogue is (the teams share the
// staging blocks and group barriers of the 16-bit epilogue). One phase per tile of the team.
struct TeamTurns {
  uint64_t multiplied[2];  // team t's mainloop of its latest tile is done
  uint64_t stored[2];      // team t's epilogue of its latest tile is done (or skipped)
};

// Consumer warps: per tile, its three stages into the accumulators, then the store (unless the
// producers voted the tile exact: they store it themselves, TileVotes). A team's warp w owns tile
// pixels 16 kMT w .. 16 kMT (w + 1) - 1 and the CTA's kNT n-tiles. Two m-tiles a warp load each B
// fragment once for both (ldmatrix wavefronts bound these kernels: perf-notes). Accumulators
// start at the bias, or at zero where the weights come scaled (mma::HalfOfFloat: scaled back,
// then biased, at the store).
template <class Mode, DType T, int kNT, int kMT, int kSlots, int kRecords>
__device__ void consume_mma_sync(const Problem& p, const Plan& plan, Ring<kSlots>& ring, TeamTurns& turns,
                                 uint32_t slots, uint32_t b_all, const float* bias, uint16_t* staged, float unscale,
                                 int warp, int lane) {
  constexpr int kTeamWarps = kConsumerWarps / kMT;  // the warps a tile needs; they release its slots
  constexpr int kTeams = kConsumerWarps / kTeamWarps;
  static_assert(kConsumerWarps % kMT == 0 && kTilePixels == 16 * kConsumerWarps && kTeams <= 2, "whole m-tiles a warp");
  constexpr bool kScaled = kScalesWeights<Mode>;
  constexpr uint32_t kSlotBytes = kSlotBytesOf<Mode, kRecords>;
  const int team = warp / kTeamWarps, other = team ^ 1;
  warp %= kTeamWarps;
  RingPos<kSlots> pos;
  int parity = 0;  // of the tile count: the votes' word
  const auto skip_tile = [&] {  // the other team's tile: its stages and its votes' word
#pragma unroll
    for (int channel = 0; channel < kInChannels; ++channel) pos.advance();
    parity ^= 1;
  };
  if (team == 1) skip_tile();
  const uint32_t a_lane = uint32_t(lane >> 4) * kRecords * kRecordBytes + uint32_t(16 * kMT * warp + (lane & 15)) * kRecordBytes;
  const uint32_t b_lane = b_all + uint32_t(lane) * 16;
  // The other team's turns this team has waited for (team 1 waits for team 0's first tile).
  uint32_t turn = 0;
  bool first = team == 0;
  for (int64_t index = blockIdx.x + int64_t(team) * gridDim.x; index < plan.tiles; index += int64_t(kTeams) * gridDim.x) {
    const Tile tile = decode_tile(plan, index);
    float acc[kMT][kNT][4];
    if constexpr (kScaled) {
      zero_accumulators(acc);
    } else {
      init_accumulators(acc, bias, lane & 3);
    }
    if (kTeams == 2 && !first) barrier_wait(&turns.multiplied[other], turn & 1);
    bool exact = false;
#pragma unroll 1
    for (int channel = 0; channel < kInChannels; ++channel) {
      barrier_wait(&ring.full[pos.slot], pos.phase);
      __syncwarp();  // ldmatrix and mma.sync need the whole warp back together
      multiply_stage<Mode, kNT, kMT>(acc, slots + pos.slot * kSlotBytes + uint32_t(tile.base) * kRecordBytes + a_lane,
                                     b_lane + uint32_t(channel) * kTapSteps * kTapBlockBytes<kNT>, uint32_t(plan.wv));
      // Read before the slot is released: the producers write the votes of the tile two on after.
      if (channel == kInChannels - 1) {
        exact = TileVotes::exact(*reinterpret_cast<const volatile uint32_t*>(&ring.votes[parity]));
      }
      barrier_arrive(&ring.empty[pos.slot]);
      pos.advance();
    }
    parity ^= 1;
    if constexpr (kTeams == 2) {
      if (!first) barrier_wait(&turns.stored[other], turn & 1);
      if (!first) ++turn;
      first = false;
      barrier_arrive(&turns.multiplied[team]);
      skip_tile();
    }
    if (!exact) {  // the same in every thread of the team: the group barriers match
      if constexpr (kScaled) {
        unscale_accumulators(acc, unscale);  // a power of two: exact
        add_bias(acc, bias, lane & 3);
      }
      if constexpr (Staged<Mode>::kHalfOutputs) {
        store_tile_staged<T>(acc, staged, p, warp, lane, p.out_pixel_major,
                             [&](int local) { return place_pixel(plan, tile, p, local).out; });
      } else {
        store_tile(acc, thread_rows<kMT>(plan, tile, p, warp, lane >> 2).out, p, lane & 3, p.out_pixel_major);
      }
    }
    if constexpr (kTeams == 2) barrier_arrive(&turns.stored[team]);
  }
}

}  // namespace s2d
}  // namespace cuda
}  // namespace alexconv
