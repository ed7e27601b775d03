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
#include "../s2d/plan.h"
#include "../s2d/ring.cuh"

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

// A tap's B block bytes in the mode's layout: bf16x3 keeps hi(w) and lo(w) blocks side by side.
template <class Mode, int kNT>
constexpr uint32_t kTapBytesOf = uint32_t(Mode::kWgBlocks) * kTapBlockBytes<kNT>;

// bf16x3's three products into an accumulator depend on each other. CUDA 12+'s ptxas interleaves
// the accumulators' chains; CUDA 11.8's left 215 NOPs between them in a stage's loop, measured
// slower (docs/perf-notes.md, "CUDA 11.8"), so there the source issues each product term
// for every accumulator before the next term (the same order of terms per accumulator).
#if defined(__CUDACC_VER_MAJOR__) && __CUDACC_VER_MAJOR__ < 12
constexpr bool kTermsOuter = true;
#else
constexpr bool kTermsOuter = false;
#endif

// acc += a stage's 9 taps. a_lane: this lane's A row of the first m-tile at tap (0, 0) (lanes
// 0-15 pixels 0-15 of plane 0, lanes 16-31 of plane 1: the m16n8k16 A fragment's four 8x8
// matrices; m-tile mt 16 mt records on); b_lane: this lane's row of the channel's first tap
// block. Tap (dy, dx) reads dy * wv + dx records on. Each B pair serves every m-tile. bf16x3
// (kRecords: the slot's plane size) reads A's lo planes 2 kRecords records after its hi ones and
// B's lo block one block after its hi one, and multiplies lo x hi, hi x lo, hi x hi: small terms
// first, as everywhere else.
template <class Mode, int kNT, int kMT, int kRecords>
__device__ __forceinline__ void multiply_stage(float (&acc)[kMT][kNT][4], uint32_t a_lane, uint32_t b_lane,
                                               uint32_t wv) {
  static_assert(kNT % 2 == 0, "n-tiles in pairs");
  constexpr bool kSplit = std::is_same_v<Mode, mma::Bf16x3>;
  constexpr uint32_t kLoPlanes = 2 * kRecords * kRecordBytes;
#pragma unroll
  for (int dy = 0; dy < kTaps1D; ++dy) {
#pragma unroll
    for (int dx = 0; dx < kTaps1D; ++dx) {
      uint32_t a[kMT][4], a_lo[kSplit ? kMT : 1][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        const uint32_t at = a_lane + (uint32_t(dy) * wv + uint32_t(dx) + 16 * mt) * kRecordBytes;
        mma::ldmatrix_x4(a[mt], at);
        if constexpr (kSplit) mma::ldmatrix_x4(a_lo[mt], at + kLoPlanes);
      }
      const uint32_t b_tap = b_lane + uint32_t(dy * kTaps1D + dx) * kTapBytesOf<Mode, kNT>;
#pragma unroll
      for (int pair = 0; pair < kNT / 2; ++pair) {
        uint32_t b[4];
        mma::ldmatrix_x4(b, b_tap + pair * kPairBytes);
        if constexpr (kSplit) {
          uint32_t b_lo[4];
          mma::ldmatrix_x4(b_lo, b_tap + kTapBlockBytes<kNT> + pair * kPairBytes);
          if constexpr (kTermsOuter) {
#pragma unroll
            for (int term = 0; term < 3; ++term) {
#pragma unroll
              for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                  const uint32_t(&a_term)[4] = term == 0 ? a_lo[mt] : a[mt];
                  const uint32_t* b_term = term == 1 ? b_lo : b;
                  mma::bf16_16816(acc[mt][2 * pair + h], a_term, b_term[2 * h], b_term[2 * h + 1]);
                }
              }
            }
          } else {
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                float(&c)[4] = acc[mt][2 * pair + h];
                mma::bf16_16816(c, a_lo[mt], b[2 * h], b[2 * h + 1]);
                mma::bf16_16816(c, a[mt], b_lo[2 * h], b_lo[2 * h + 1]);
                mma::bf16_16816(c, a[mt], b[2 * h], b[2 * h + 1]);
              }
            }
          }
        } else {
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            mma_16816<Mode>(acc[mt][2 * pair], a[mt], b[0], b[1]);
            mma_16816<Mode>(acc[mt][2 * pair + 1], a[mt], b[2], b[3]);
          }
        }
      }
    }
  }
}

// Where warps own kMT > 1 m-tiles (12 / kMT warps cover a tile), the twelve consumer warps form
// kMT teams that take the CTA's tiles in turn: one team's epilogue runs while another multiplies.
// Team t starts a tile once team t - 1 has handed the ring over (`handoff`): once it has released
// the stage whose slot the new tile's first stage reuses, kSlots stages on. Every `full` wait of
// the new tile is then for a phase whose previous one has completed, so none can be mistaken
// for it, and two teams multiply side by side for the new tile's first stages (two of three with
// three slots, one with two; an earlier handoff would let a wait pass on the stale phase).
// 16-bit outputs leave through the staging blocks and group barriers both teams share: there a
// team hands over after its mainloop and only once the other's epilogue is done (`stored`), so
// the mainloops never overlap and the epilogues alternate. One phase per tile of the team.
constexpr int kMaxTeams = 3;
struct TeamTurns {
  uint64_t handoff[kMaxTeams];  // team t has released its latest tile's stages up to the handoff
  uint64_t stored[kMaxTeams];   // team t's 16-bit epilogue of its latest tile is done (or skipped)

  // `turn`: how many of team t's tiles the caller has waited for before (one phase per tile).
  __device__ __forceinline__ void wait_handoff(int t, uint32_t turn) { barrier_wait(&handoff[t], turn & 1); }
  __device__ __forceinline__ void hand_off(int t) { barrier_arrive(&handoff[t]); }
  __device__ __forceinline__ void wait_stored(int t, uint32_t turn) { barrier_wait(&stored[t], turn & 1); }
  __device__ __forceinline__ void mark_stored(int t) { barrier_arrive(&stored[t]); }
};

// Consumer warps: per tile, its three stages into the accumulators, then the store (unless the
// producers voted the tile exact: they store it themselves, TileVotes). A team's warp w owns tile
// pixels 16 kMT w .. 16 kMT (w + 1) - 1 and the CTA's kNT n-tiles. Two m-tiles a warp load each B
// fragment once for both (ldmatrix wavefronts bound these kernels: docs/perf-notes.md, "The
// portable space-to-depth kernel"). Accumulators start at the bias, or at zero where the weights
// come scaled (mma::Float32AsHalf: scaled back, then biased, at the store).
template <class Mode, DType T, int kNT, int kMT, int kSlots, int kRecords>
__device__ void consume_mma_sync(const Problem& p, const Plan& plan, Ring<kSlots>& ring, TeamTurns& turns,
                                 uint32_t slots, uint32_t b_all, const float* bias, uint16_t* staged, float unscale,
                                 int warp, int lane) {
  constexpr int kTeamWarps = kConsumerWarps / kMT;  // the warps a tile needs; they release its slots
  constexpr int kTeams = kConsumerWarps / kTeamWarps;
  static_assert(kConsumerWarps % kMT == 0 && kTilePixels == 16 * kConsumerWarps && kTeams <= kMaxTeams,
                "whole m-tiles a warp");
  constexpr bool kScaled = kScalesWeights<Mode>;
  // 16-bit outputs share the staging blocks (see TeamTurns); float32 outputs go straight from
  // the registers, and the teams' mainloops and epilogues may overlap.
  constexpr bool kStagedStores = Staged<Mode>::kHalfOutputs;
  static_assert(kTeams <= 2 || !kStagedStores, "the staged epilogue alternates two teams");
  // float32 outputs: the stage after whose release a team hands over (the next tile's first stage
  // reuses its slot; with more slots than stages, after the first). 16-bit outputs hand over after
  // the mainloop, below.
  constexpr int kHandoffAfter = kSlots >= kInChannels ? 0 : int(kInChannels) - kSlots;
  constexpr uint32_t kSlotBytes = kSlotBytesOf<Mode, kRecords>;
  // Teams take tiles in turn: team t waits for team `before`'s handoff.
  const int team = warp / kTeamWarps, before = (team + kTeams - 1) % kTeams;
  warp %= kTeamWarps;
  RingPos<kSlots> pos;
  int parity = 0;  // of the tile count: the votes' word
  const auto skip_tile = [&] {  // the other team's tile: its stages and its votes' word
#pragma unroll
    for (int channel = 0; channel < kInChannels; ++channel) pos.advance();
    parity ^= 1;
  };
  for (int t = 0; t < team; ++t) skip_tile();
  const uint32_t a_lane = uint32_t(lane >> 4) * kRecords * kRecordBytes + uint32_t(16 * kMT * warp + (lane & 15)) * kRecordBytes;
  const uint32_t b_lane = b_all + uint32_t(lane) * 16;
  // The turns of team `before` this team has waited for (team t > 0 waits for team t - 1's first tile).
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
    if (kTeams > 1 && !first) turns.wait_handoff(before, turn);
    bool exact = false;
#pragma unroll 1
    for (int channel = 0; channel < kInChannels; ++channel) {
      ring.consumer_wait(pos);
      __syncwarp();  // ldmatrix and mma.sync need the whole warp back together
      multiply_stage<Mode, kNT, kMT, kRecords>(acc, slots + pos.slot * kSlotBytes + uint32_t(tile.base) * kRecordBytes + a_lane,
                                               b_lane + uint32_t(channel) * kTapSteps * kTapBytesOf<Mode, kNT>, uint32_t(plan.wv));
      // Read before the slot is released: the producers write the votes of the tile two on after.
      if (channel == kInChannels - 1) {
        exact = TileVotes::exact(*reinterpret_cast<const volatile uint32_t*>(&ring.votes[parity]));
      }
      ring.consumer_release(pos);
      pos.advance();
      if (kTeams > 1 && !kStagedStores && channel == kHandoffAfter) turns.hand_off(team);
    }
    parity ^= 1;
    if constexpr (kTeams > 1) {
      if constexpr (kStagedStores) {
        if (!first) turns.wait_stored(before, turn);
        turns.hand_off(team);
      }
      if (!first) ++turn;
      first = false;
      for (int t = 1; t < kTeams; ++t) skip_tile();
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
    if constexpr (kTeams > 1 && kStagedStores) turns.mark_stored(team);
  }
}

}  // namespace s2d
}  // namespace cuda
}  // namespace alexconv
