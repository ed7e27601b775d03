// The portable space-to-depth kernel's producer warps where the input's rows allow it
// (pairs_apply): windows loaded as column pairs, 16-bit ones three stages in flight. (Elsewhere
// it takes the element-load producers of s2d/producers.cuh.)
//
// A unit's row segment is 4 columns from an even one (the padding is even), so with even rows and widths
// each half of it is one aligned word -- 4 bytes of 16-bit values, which are already a record's
// word, or 8 of float32 (rounded to fp16 words, or split into bf16x3's hi and lo records) --
// wholly inside the image or wholly outside: 4 loads a unit instead of 8. And 16-bit loads are
// issued two stages before their records are written, into register sets of their own, so a
// stage's load latency overlaps the stages before instead of following them (the element-load
// producers keep one stage in flight: the consumers of the 99 KB fit waited on them; measured in
// docs/perf-notes.md, "The portable space-to-depth kernel").
#pragma once

#include <cstdint>
#include <type_traits>

#include "../../conv1_geometry.h"
#include "../arch/global_loads.cuh"
#include "../arch/mbarrier.cuh"
#include "../common/operand_modes.cuh"
#include "../common/ring.cuh"
#include "../s2d/plan.h"
#include "../s2d/producers.cuh"
#include "../s2d/ring.cuh"

namespace alexconv {
namespace cuda {
namespace s2d {

// Whether a window's column pairs can be loaded whole: rows of unit stride and even width, every
// row and channel starting at an even element of an input aligned to a pair.
inline bool pairs_apply(const Problem& p) {
  const int64_t elem = element_bytes(p.dtype);
  return p.pad % 2 == 0 && p.in_stride[3] == 1 && p.in_w % 2 == 0 && p.in_stride[2] % 2 == 0 && p.in_stride[1] % 2 == 0 &&
         p.in_stride[0] % 2 == 0 && reinterpret_cast<uintptr_t>(p.input) % (2 * elem) == 0;
}

// One stage's loads: per unit, its 4 pairs in record order (row ry, half h at 2 ry + h).
template <class Mode, int kUnits>
struct PairStage {
  using Pair = std::conditional_t<std::is_same_v<typename Mode::Raw, float>, float2, uint32_t>;
  Pair v[kUnits][4];
};

// Units kFrom .. kTo - 1 of a stage (float32 rounded to fp16 loads a stage in two halves).
template <class Mode, int kUnits, int kFrom = 0, int kTo = kUnits>
__device__ __forceinline__ void load_pairs(PairStage<Mode, kUnits>& stage, const Problem& p, const Plan& plan,
                                           const Tile& tile, int channel, int thread) {
  using Raw = typename Mode::Raw;
  const Raw* image = static_cast<const Raw*>(p.input) + tile.n * p.in_stride[0] + channel * p.in_stride[1];
  const unsigned height = unsigned(p.in_h), width = unsigned(p.in_w);
  const int row0 = int(tile.iy0()), col0 = int(tile.ix0());
#pragma unroll
  for (int k = kFrom; k < kTo; ++k) {
    const ThreadUnit unit = thread_unit(plan, thread, k, int(tile.skip));
    const int iy = row0 + unit.at.row, ix = col0 + unit.at.col;
    const Raw* row = image + int64_t(iy) * p.in_stride[2] + ix;
#pragma unroll
    for (int ry = 0; ry < 2; ++ry) {
      const bool row_ok = unit.owned && unsigned(iy + ry) < height;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        stage.v[k][2 * ry + h] = load_or_zero2(row + ry * p.in_stride[2] + 2 * h, row_ok && unsigned(ix + 2 * h) < width);
      }
    }
  }
}

// What a stage's records tell the tile's vote, gathered over its units (vote_of: the TileVotes bits):
// bf16x3 a probe that turns non-finite at a value the split cannot hold (split_unit), 16-bit
// words their magnitudes.
template <class Mode>
using PairVotes = std::conditional_t<std::is_same_v<Mode, mma::Bf16x3>, float, HalfMagnitudes<Mode>>;
template <class Mode>
__device__ __forceinline__ uint32_t vote_of(const PairVotes<Mode>& votes) {
  if constexpr (std::is_same_v<Mode, mma::Bf16x3>) {
    return probe_votes_exact(votes) ? TileVotes::kExact : 0;
  } else {
    return votes.vote();
  }
}

// Writes units kFrom .. kTo - 1 of a stage's records (float32 rounded to fp16, or split into bf16x3's
// hi and lo planes, on the way), gathering their votes.
template <class Mode, Round kRound, int kUnits, int kRecords, int kFrom = 0, int kTo = kUnits>
__device__ __forceinline__ void store_pairs(unsigned char* slot, const PairStage<Mode, kUnits>& stage,
                                            const Plan& plan, int thread, PairVotes<Mode>& votes) {
  if constexpr (std::is_same_v<Mode, mma::Bf16x3>) {
    float& probe = votes;
#pragma unroll
    for (int k = kFrom; k < kTo; ++k) {
      const float2* pair = stage.v[k];
      const float v[kUnitValues] = {pair[0].x, pair[0].y, pair[1].x, pair[1].y,
                                    pair[2].x, pair[2].y, pair[3].x, pair[3].y};
      const int u = thread + k * kProducerThreads;
      uint4* hi = reinterpret_cast<uint4*>(slot + record_at<kRecords>(plan, u));
      split_unit<kRound>(v, u < 2 * int(plan.cells), hi, hi + 2 * kRecords, probe);
    }
  } else {
    HalfMagnitudes<Mode>& halves = votes;
#pragma unroll
    for (int k = kFrom; k < kTo; ++k) {
      uint32_t w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if constexpr (std::is_same_v<Mode, mma::Float32AsHalf>) {
          const float2 pair = stage.v[k][i];
          w[i] = mma::pack_half2(pair.x, pair.y);
          halves.float_bits |= __float_as_uint(pair.x) | __float_as_uint(pair.y);
        } else {
          w[i] = stage.v[k][i];
        }
        halves.add(w[i]);
      }
      // A repeated unit (see thread_unit) writes no record; the record's offset needs no division.
      const int u = thread + k * kProducerThreads;
      if (u < 2 * int(plan.cells)) {
        *reinterpret_cast<uint4*>(slot + record_at<kRecords>(plan, u)) = make_uint4(w[0], w[1], w[2], w[3]);
      }
    }
  }
}

// Producer warps: 16-bit stage s + 2's loads go out before stage s's records are written, into
// the third of three register sets (24 registers each); the sets rotate by unrolling the loop by
// three (each a fixed array). With two sets the loads had one stage's time to land and the
// consumers waited on them (measured: perf-notes, "The portable space-to-depth kernel"). float32 keeps one set
// (two of its 48 registers each spilled: ptxas, 250 bytes); float32 rounded to fp16 (allow_tf32)
// uses it in two halves: once a stage's first half of units is written, the next stage's first
// half is loaded into its registers, and its second half once the stage is full -- so each
// half's loads land while the other half is written (faster than loading whole stages only after
// the last one was written: perf-notes, "The portable space-to-depth kernel").
template <class Mode, DType T, int kUnits, int kSlots, int kChannels, int kRecords>
__device__ void produce_pairs(const Problem& p, const Plan& plan, unsigned char* slots, Ring<kSlots>& ring,
                              Round round, int warp, int lane) {
  // Three sets where a CTA computes a group of the channels; with all 96 (twice the consumer
  // registers) ptxas spilled 40-52 bytes for the third set, so two.
  constexpr int kSets = sizeof(typename Mode::Raw) == 4 ? 1 : kChannels < kOutChannels ? 3 : 2;
  constexpr int kHalf = kUnits / 2;
  using Stage = PairStage<Mode, kUnits>;
  const int thread = warp * 32 + lane;
  StageCursor<Plan> at(plan);
  // The stage whose loads go out next, as its tile's index and channel: its tile is decoded
  // where used (a second cursor's decoded tile, held across the stages, made ptxas spill).
  int64_t ahead_index = blockIdx.x;
  int ahead_channel = 0;
  const auto next_ahead = [&] {
    if (++ahead_channel == kInChannels) ahead_channel = 0, ahead_index += gridDim.x;
    return ahead_index < plan.tiles;
  };
  RingPos<kSlots> pos;
  ExactTiles exact;
  // Units kFrom .. kTo - 1 of stage `at` into its slot (only bf16x3's split rounds; 16-bit words
  // keep one instance).
  const auto store = [&](auto from, auto to, unsigned char* slot, const Stage& loaded, PairVotes<Mode>& votes) {
    constexpr int kFrom = decltype(from)::value, kTo = decltype(to)::value;
    if (!Staged<Mode>::kSplit || round == Round::kNearest) {
      store_pairs<Mode, Round::kNearest, kUnits, kRecords, kFrom, kTo>(slot, loaded, plan, opaque(thread), votes);
    } else {
      store_pairs<Mode, Round::kTowardZero, kUnits, kRecords, kFrom, kTo>(slot, loaded, plan, opaque(thread), votes);
    }
  };
  // Stage `at` is written: its votes, the arrival on `full`, the exact store of a voted tile.
  const auto finish_stage = [&](const PairVotes<Mode>& votes) {
    const bool last = at.channel == kInChannels - 1;
    exact.staged<Mode>(vote_of<Mode>(votes), last, ring, warp, lane);
    // (No async-proxy fence, unlike s2d/producers.cuh: ldmatrix reads through the generic proxy.)
    ring.producer_commit(pos);
    if (last) exact.finish<T, kSlots, kChannels>(ring, pos, p, plan, at.tile_index, thread);
    at.advance(plan);
    pos.advance();
    return at.valid(plan);
  };
  const auto slot_of = [&] {
    ring.producer_acquire(pos);
    return slots + pos.slot * kSlotBytesOf<Mode, kRecords>;
  };
  using Zero = std::integral_constant<int, 0>;
  using Half = std::integral_constant<int, kHalf>;
  using All = std::integral_constant<int, kUnits>;
  // 16 bits: writes stage `at` (loaded into `loaded`) after issuing the loads kSets - 1 stages on into `next`.
  const auto step = [&](Stage& loaded, Stage& next) {
    if (next_ahead()) load_pairs(next, p, plan, decode_tile(plan, ahead_index), ahead_channel, opaque(thread));
    unsigned char* slot = slot_of();
    PairVotes<Mode> votes{};
    store(Zero{}, All{}, slot, loaded, votes);
    return finish_stage(votes);
  };
  if (!at.valid(plan)) return;
  if constexpr (kSets == 3) {
    Stage a, b, c;
    load_pairs(a, p, plan, at.tile, at.channel, thread);
    if (next_ahead()) load_pairs(b, p, plan, decode_tile(plan, ahead_index), ahead_channel, thread);
    while (step(a, c) && step(b, a) && step(c, b)) {
    }
  } else if constexpr (kSets == 2) {
    Stage a, b;
    load_pairs(a, p, plan, at.tile, at.channel, thread);
    while (step(a, b) && step(b, a)) {
    }
  } else if constexpr (Staged<Mode>::kSplit) {
    // bf16x3: a stage's loads go out just before its slot is waited for (its split kept the
    // halves below from gaining: measured the same, perf-notes).
    Stage a;
    bool more = true;
    while (more) {
      load_pairs(a, p, plan, at.tile, at.channel, opaque(thread));
      unsigned char* slot = slot_of();
      PairVotes<Mode> votes{};
      store(Zero{}, All{}, slot, a, votes);
      more = finish_stage(votes);
    }
  } else {
    Stage a;
    load_pairs(a, p, plan, at.tile, at.channel, thread);
    bool more = true;
    while (more) {
      const bool ahead = next_ahead();
      unsigned char* slot = slot_of();
      PairVotes<Mode> votes{};
      store(Zero{}, Half{}, slot, a, votes);
      if (ahead) {
        load_pairs<Mode, kUnits, 0, kHalf>(a, p, plan, decode_tile(plan, ahead_index), ahead_channel, opaque(thread));
      }
      store(Half{}, All{}, slot, a, votes);
      more = finish_stage(votes);
      if (ahead) {
        load_pairs<Mode, kUnits, kHalf, kUnits>(a, p, plan, decode_tile(plan, ahead_index), ahead_channel,
                                                opaque(thread));
      }
    }
  }
}

}  // namespace s2d
}  // namespace cuda
}  // namespace alexconv
