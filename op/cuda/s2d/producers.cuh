// The space-to-depth kernel's producer warps (s2d.cu): per (tile, input
// channel) stage they stage the tile's window of cells as records, from element loads
// (produce) or from a copy they permute (produce_copied), and vote on the tiles that
// must be stored exactly.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../../conv1_geometry.h"
#include "../arch/global_loads.cuh"
#include "../arch/mbarrier.cuh"
#include "../arch/smem.cuh"
#include "../arch/tma.cuh"
#include "../common/dtype.cuh"
#include "../common/operand_modes.cuh"
#include "../common/ring.cuh"
#include "../common/tile_order.h"  // Divider, strip_columns, kMaxIndex
#include "../common/role_barriers.cuh"
#include "../direct/direct.cuh"
#include "copies_sm90.cuh"
#include "plan.h"
#include "ring.cuh"

namespace alexconv {
namespace cuda {
namespace s2d {

// A producer thread's units are u = thread, thread + 128, ... below 2 * cells. Their
// places are the same every stage, yet in the element-load producers cheaper to work
// out again (a multiply-high, a shift, a few adds) than to keep: held across the loop
// they spill. The thread index goes through an empty asm each stage so the compiler
// cannot hoist them. (The copy-staged producers keep their unit keys in shared memory.)
__device__ __forceinline__ int opaque(int v) {
  asm volatile("" : "+r"(v));
  return v;
}
// Unit k of `thread`: past the window's last unit it repeats that one, so the code
// stays straight-line and in bounds; such a unit (not `owned`) loads nothing from
// global memory and writes no record. skip: the tile's (unit_at); a unit's record and
// ownership do not depend on it.
struct ThreadUnit {
  Unit at;
  bool owned;
};
template <int kRecords = kPlaneRecords>
__device__ __forceinline__ ThreadUnit thread_unit(const Plan& plan, int thread, int k, int skip) {
  const int u = thread + k * kProducerThreads, last = 2 * int(plan.cells) - 1;
  return {unit_at<kRecords>(plan, min(u, last), skip), u <= last};
}

// Issues the loads of this thread's units of the window of (tile, channel); any
// strides. Padding and cells past the image load 0.
template <int kUnits, class Raw>
__device__ __forceinline__ void load_units(Raw (&v)[kUnits][kUnitValues], const Problem& p,
                                           const Plan& plan, const Tile& tile, int channel,
                                           int thread) {
  const Raw* image = static_cast<const Raw*>(p.input) + tile.n * p.in_stride[0] +
                     channel * p.in_stride[1];
  const unsigned height = unsigned(p.in_h), width = unsigned(p.in_w);
  const int row0 = int(tile.iy0()), col0 = int(tile.ix0());
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    const ThreadUnit unit = thread_unit(plan, thread, k, int(tile.skip));
    // Negative coordinates wrap to huge unsigned values: one compare per bound. A
    // repeated unit loads nothing.
    const int iy = row0 + unit.at.row, ix = col0 + unit.at.col;
    const Raw* row = image + int64_t(iy) * p.in_stride[2] + int64_t(ix) * p.in_stride[3];
#pragma unroll
    for (int ry = 0; ry < 2; ++ry) {
      const bool row_ok = unit.owned && unsigned(iy + ry) < height;
#pragma unroll
      for (int rx = 0; rx < 4; ++rx) {
        v[k][ry * 4 + rx] = load_or_zero(row + ry * p.in_stride[2] + rx * p.in_stride[3],
                                         row_ok && unsigned(ix + rx) < width);
      }
    }
  }
}

// Watches packed 16-bit words for what TileVotes needs: the largest magnitude seen,
// two halves at a time (one 3-input max per two words on sm_90); and for float32
// multiplied as fp16 the OR of the float32 bits, which sees values that round to 0.
template <class Mode>
struct HalfMagnitudes {
  uint32_t largest = 0;
  uint32_t float_bits = 0;
  __device__ __forceinline__ void add(uint32_t word) {
#if defined(__CUDACC_VER_MAJOR__) && __CUDACC_VER_MAJOR__ < 12 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    // CUDA 11's __vmaxu2 splits the halves (two ANDs and two 32-bit maxima a word, then an OR),
    // and its PTX has no max.u16x2. The magnitudes are non-negative fp16 or bf16 words, which
    // order as their bits do, so the packed floating-point maximum keeps the same largest word;
    // its .NaN form turns any NaN into the canonical 0x7fff, above both Inf and kLargeFloor as
    // the NaN's own bits are, so vote() is unchanged. One instruction a word (ptxas 13: one
    // three-input VHMNMX per two words, as CUDA 13's own build does with VIMNMX3.U16x2).
    const uint32_t magnitude = word & 0x7fff7fffu;
    if constexpr (Mode::kIsBf16) {
      asm("max.NaN.bf16x2 %0, %0, %1;" : "+r"(largest) : "r"(magnitude));
    } else {
      asm("max.NaN.f16x2 %0, %0, %1;" : "+r"(largest) : "r"(magnitude));
    }
#else
    largest = __vmaxu2(largest, word & 0x7fff7fffu);
#endif
  }
  __device__ __forceinline__ uint32_t vote() const {
    constexpr uint32_t kInf = Mode::kIsBf16 ? 0x7f80u : 0x7c00u;
    constexpr uint32_t kLargeFloor = 0x1400u;  // 2^-10 in fp16
    const uint32_t top = max(largest & 0xffffu, largest >> 16);
    uint32_t vote = top >= kInf ? TileVotes::kExact : 0;
    if constexpr (std::is_same_v<Mode, mma::Float32AsHalf>) {
      vote |= (top >= kLargeFloor ? TileVotes::kLarge : 0) |
              ((float_bits & 0x7fffffffu) != 0 ? TileVotes::kNonzero : 0);
    }
    return vote;
  }
};

// bf16x3: one unit's values as its hi and lo records (planes j and 2 + j), and `probe`, which
// turns non-finite once one of them is not finite: the tile's vote to be stored exactly.
// Split to nearest, the probe sums the residuals x - hi(x) (rounded, not clamped as
// mma::split_bf16x2 does: the vote covers what the clamp is for). Each is exact and within
// 2^-8 |x|, so a stage's sum stays finite unless some x is Inf or NaN (residual NaN) or rounds
// to an infinite hi (residual -+Inf) -- where a chain of x * 0 + probe had 48 dependent FMAs a
// stage (perf-notes). Split toward zero (a launch with an infinite weight), probe = x * 0 + probe.
template <Round kRound>
__device__ __forceinline__ void split_unit(const float (&v)[kUnitValues], bool write, uint4* hi, uint4* lo,
                                           float& probe) {
  uint32_t h[4], l[4];
  if constexpr (kRound == Round::kNearest) {
    // A repeated unit loaded zeros (thread_unit); its owner probes and writes it.
    if (!write) return;
    float r[kUnitValues];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const __nv_bfloat162 hw = __floats2bfloat162_rn(v[2 * w], v[2 * w + 1]);
      h[w] = *reinterpret_cast<const uint32_t*>(&hw);
      r[2 * w] = v[2 * w] - mma::bf16_low_half(h[w]);
      r[2 * w + 1] = v[2 * w + 1] - mma::bf16_high_half(h[w]);
      const __nv_bfloat162 lw = __floats2bfloat162_rn(r[2 * w], r[2 * w + 1]);
      l[w] = *reinterpret_cast<const uint32_t*>(&lw);
    }
    probe += ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
  } else {
#pragma unroll
    for (int i = 0; i < kUnitValues; ++i) probe = fmaf(v[i], 0.f, probe);
    // The conversion is long enough that a repeated unit skips it.
    if (!write) return;
#pragma unroll
    for (int w = 0; w < 4; ++w) mma::split_bf16x2(v[2 * w], v[2 * w + 1], h[w], l[w], kRound);
  }
  *hi = make_uint4(h[0], h[1], h[2], h[3]);
  *lo = make_uint4(l[0], l[1], l[2], l[3]);
}
// Whether a thread's probe (split_unit) saw a value that sends its tile to the exact store.
__device__ __forceinline__ bool probe_votes_exact(float probe) { return !(fabsf(probe) < INFINITY); }

// Writes this thread's units as records into the slot's planes (in the MMA's
// operand format). Returns its TileVotes bits.
template <class Mode, Round kRound, int kUnits, int kRecords>
__device__ __forceinline__ uint32_t store_units(unsigned char* slot,
                                                const typename Mode::Raw (&v)[kUnits][kUnitValues],
                                                const Plan& plan, int thread) {
  float probe = 0.f;  // bf16x3: see split_unit
  HalfMagnitudes<Mode> halves;
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    const ThreadUnit unit = thread_unit<kRecords>(plan, thread, k, 0);
    // Row pair j's plane: bf16x3 hi j, lo 2 + j; 16-bit j.
    const auto record = [&](int plane) {
      return reinterpret_cast<uint4*>(slot + unit.at.record + plane * kRecords * kRecordBytes);
    };
    if constexpr (std::is_same_v<Mode, mma::Bf16x3>) {
      split_unit<kRound>(v[k], unit.owned, record(0), record(2), probe);
    } else {
      uint32_t w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if constexpr (std::is_same_v<Mode, mma::Float32AsHalf>) {
          w[i] = mma::pack_half2(v[k][2 * i], v[k][2 * i + 1]);
          halves.float_bits |= __float_as_uint(v[k][2 * i]) | __float_as_uint(v[k][2 * i + 1]);
        } else {
          w[i] = mma::pack_u16(v[k][2 * i], v[k][2 * i + 1]);
        }
        halves.add(w[i]);
      }
      if (unit.owned) *record(0) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
  if constexpr (std::is_same_v<Mode, mma::Bf16x3>) {
    return probe_votes_exact(probe) ? TileVotes::kExact : 0;
  } else {
    return halves.vote();
  }
}

// A tile TileVotes sends to the exact path, stored value by value (direct/direct.cuh)
// by the producer threads while the consumers go on (they skip its stores): exact,
// and out of the consumers' code, where a branch to it serialises every wgmma
// (ptxas C7518). A call: its loops stay out of the producers' registers. (The
// kernel's parameters are __grid_constant__, so passing them by reference copies nothing.)
// The tile comes as its index, decoded here: the producers' loop then keeps none of
// its fields but what staging needs. kChannels: the channels a CTA computes (a split
// kernel's group, from p's first), of which those of the weight's are stored.
template <DType T, int kChannels = int(kOutChannels)>
__device__ __noinline__ void store_exact_tile(const Problem& p, const Plan& plan, int64_t index,
                                              int thread) {
  const Tile tile = decode_tile(plan, index);
  using S = typename Storage<T>::type;
  S* out = static_cast<S*>(p.output);
  int channels = int(p.out_channels);
  if constexpr (kChannels < kOutChannels) channels = min(channels, kChannels);
#pragma unroll 1
  for (int e = thread; e < kTilePixels * channels; e += kProducerThreads) {
    const int co = e / kTilePixels;  // consecutive threads, consecutive pixels
    const Pixel px = place_pixel(plan, tile, p, e % kTilePixels);
    if (px.out >= 0) {
      out[px.out + co * p.out_stride[1]] = relu_output<T>(direct_output<T>(p, tile.n, co, px.oy, px.ox), p.relu);
    }
  }
}

// The producers' side of TileVotes: each warp ORs its lanes' votes over a tile's
// windows and publishes its byte before the tile's last arrival on `full`; once
// every warp's byte is in, the producers store a tile that needs it exactly.
struct ExactTiles {
  uint32_t seen = 0;  // warp-uniform
  int parity = 0;     // of the tile count
  // After staging a stage's records, before arriving on its `full`. Modes whose
  // votes are kExact alone keep the plain vote they had before TileVotes (the
  // reduction measured the same for them).
  template <class Mode, int kSlots>
  __device__ void staged(uint32_t vote, bool last, Ring<kSlots>& ring, int warp, int lane) {
    if constexpr (std::is_same_v<Mode, mma::Float32AsHalf>) {
      seen |= __reduce_or_sync(0xffffffffu, vote);
    } else {
      seen |= __any_sync(0xffffffffu, vote != 0) ? TileVotes::kExact : 0;
    }
    if (last && lane == 0) reinterpret_cast<volatile uint8_t*>(&ring.votes[parity])[warp] = seen;
  }
  // After arriving on the `full` (at pos) of a tile's last stage.
  template <DType T, int kSlots, int kChannels = int(kOutChannels)>
  __device__ void finish(Ring<kSlots>& ring, RingPos<kSlots> pos, const Problem& p,
                         const Plan& plan, int64_t tile_index, int thread) {
    ring.consumer_wait(pos);  // every producer warp's byte is in
    if (TileVotes::exact(*reinterpret_cast<volatile uint32_t*>(&ring.votes[parity]))) {
#if defined(__CUDACC_VER_MAJOR__) && __CUDACC_VER_MAJOR__ < 12
      // CUDA 11's front end gives a __grid_constant__ parameter whose address reaches a call a
      // generic address, and the kernel then reads it with generic loads in every stage (and
      // its ptxas crashed on such kernels with line info); copies made for the call keep the
      // parameters in the constant bank, as CUDA 12+ keeps them (perf-notes, "CUDA 11.8").
      const Problem problem = p;
      const Plan tile_plan = plan;
      store_exact_tile<T, kChannels>(problem, tile_plan, tile_index, thread);
#else
      store_exact_tile<T, kChannels>(p, plan, tile_index, thread);
#endif
    }
    seen = 0;
    parity ^= 1;
  }
};

// Producer warps: per stage, load the window's units into registers (in flight
// while the slot is still being read), then write its records once the slot is free.
// kSlots, kChannels, kRecords: the kernel's ring, the output channels a CTA computes and its
// slots' plane size (the portable kernel's differ from the Hopper one's).
template <class Mode, DType T, int kUnits, int kSlots = Staged<Mode>::kSlots, int kChannels = int(kOutChannels),
          int kRecords = kPlaneRecords>
__device__ void produce(const Problem& p, const Plan& plan, unsigned char* slots,
                        Ring<kSlots>& ring, Round round, int warp, int lane) {
  using Raw = typename Mode::Raw;
  const int thread = warp * 32 + lane;
  Raw v[kUnits][kUnitValues];
  StageCursor<Plan> at(plan);
  RingPos<kSlots> pos;
  ExactTiles exact;
  while (at.valid(plan)) {
    const int t = opaque(thread);
    load_units<kUnits>(v, p, plan, at.tile, at.channel, t);
    ring.producer_acquire(pos);
    unsigned char* slot = slots + pos.slot * kSlotBytesOf<Mode, kRecords>;
    const uint32_t vote = round == Round::kNearest
                              ? store_units<Mode, Round::kNearest, kUnits, kRecords>(slot, v, plan, t)
                              : store_units<Mode, Round::kTowardZero, kUnits, kRecords>(slot, v, plan, t);
    const bool last = at.channel == kInChannels - 1;
    exact.staged<Mode>(vote, last, ring, warp, lane);
    fence_async_proxy();  // the records were written through the generic proxy; wgmma reads them
    ring.producer_commit(pos);
    if (last) exact.finish<T, kSlots, kChannels>(ring, pos, p, plan, at.tile_index, thread);
    at.advance(plan);
    pos.advance();
  }
}

// Producer warps, staging through the copy engine (Copies: BoxCopies or SpanCopies,
// s2d/copies_sm90.cuh): one thread keeps a copy in flight in each of the kRawSlots raw
// slots; all 128 permute each landed one into records (no global addresses). A copy
// serves Copies::kStagesPerCopy stages in a row (one channel's window, or a tile's three
// interleaved), and the next copy into its slot goes out once they are all staged. A
// stage's shared loads all go out before its slot is awaited and written.
template <class Mode, DType T, int kUnits, int kRawSlots, int kRawSlotBytes, class Copies>
__device__ void produce_copied(const Problem& p, const Plan& plan, const Copies& copies,
                               unsigned char* slots, unsigned char* raw, uint32_t* unit_keys,
                               Ring<Staged<Mode>::kSlots>& ring, int warp, int lane) {
  constexpr int kStagesPerCopy = Copies::kStagesPerCopy;
  static_assert(kStagesPerCopy == 1 || kStagesPerCopy == kInChannels, "copies hold one stage or one tile");
  static_assert(kRawSlots <= 2, "Ring::landed has two barriers");
  const int thread = warp * 32 + lane;
  StageCursor<Plan> at(plan), copy(plan);
  RingPos<Staged<Mode>::kSlots> pos;
  RingPos<kRawSlots> raw_pos, copy_pos;
  const auto issue_next = [&] {
    if (thread == 0 && copy.valid(plan)) {
      copies.issue(raw + copy_pos.slot * kRawSlotBytes, p, plan, copy.tile, copy.channel,
                   &ring.landed[copy_pos.slot]);
    }
#pragma unroll
    for (int s = 0; s < kStagesPerCopy; ++s) copy.advance(plan);
    copy_pos.advance();
  };
#pragma unroll
  for (int r = 0; r < kRawSlots; ++r) issue_next();
  // What a unit's reads need is the same every stage but takes a division to find:
  // worked out once, into shared memory (kept in registers, it pushes the producers
  // past their 80), and read back by the same thread each stage before its window is
  // awaited.
  uint32_t* own_keys = unit_keys + thread;  // unit k at [k * kProducerThreads]
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    own_keys[k * kProducerThreads] = copies.unit_key(thread_unit(plan, thread, k, 0).at);  // row-start windows
  }
  const int last_unit = 2 * int(plan.cells) - 1;
  ExactTiles exact;
  while (at.valid(plan)) {
    // Copies of a tile's three stages start with its first (StageCursor walks channels).
    const bool first_of_copy = kStagesPerCopy == 1 || at.channel == 0;
    const bool last_of_copy = kStagesPerCopy == 1 || at.channel == kInChannels - 1;
    uint32_t key[kUnits];
#pragma unroll
    for (int k = 0; k < kUnits; ++k) key[k] = own_keys[k * kProducerThreads];
    const typename Copies::Stage stage =
        copies.stage(raw + raw_pos.slot * kRawSlotBytes, p, at.tile, at.channel);
    if constexpr (kStagesPerCopy > 1) {
      // The copy cursor is a tile ahead: its copy goes out once this tile is staged.
      if (first_of_copy && thread == 0 && copy.valid(plan)) copies.prefetch(p, plan, copy.tile);
    }
    if (first_of_copy) ring.wait_landed(raw_pos);
    HalfMagnitudes<Mode> halves;
    uint4 record[kUnits];
#pragma unroll
    for (int k = 0; k < kUnits; ++k) record[k] = copies.record(stage, key[k], p, halves.float_bits);
    ring.producer_acquire(pos);
    unsigned char* slot = slots + pos.slot * Staged<Mode>::kSlotBytes;
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
      // A repeated unit (see thread_unit) writes no record.
      const int u = thread + k * kProducerThreads;
      if (u <= last_unit) *reinterpret_cast<uint4*>(slot + record_at(plan, u)) = record[k];
      halves.add(record[k].x);
      halves.add(record[k].y);
      halves.add(record[k].z);
      halves.add(record[k].w);
    }
    const bool last = at.channel == kInChannels - 1;
    exact.staged<Mode>(halves.vote(), last, ring, warp, lane);
    // The records were written through the generic proxy (wgmma reads them through
    // the async proxy), and the window was read through it before a copy overwrites it.
    fence_async_proxy();
    if (last_of_copy) producer_barrier();  // every producer is done with the window
    // The records are in: the consumers need not wait for the next copy's issue.
    ring.producer_commit(pos);
    if (last_of_copy) issue_next();
    if (last) exact.finish<T>(ring, pos, p, plan, at.tile_index, thread);
    at.advance(plan);
    pos.advance();
    if (last_of_copy) raw_pos.advance();
  }
}

}  // namespace s2d
}  // namespace cuda
}  // namespace alexconv
