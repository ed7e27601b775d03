// The space-to-depth implicit GEMM (Hopper, sm_90a): both wgmma operands come
// straight from shared memory, so the consumer warps issue MMAs and nothing else.
//
// conv1_s2d_plan.h folds the stride into 16 phases per input channel, making the
// layer a 3x3 stride-1 convolution (K = 3 channels x 9 taps x 16 phases = 432, of
// which 363 are real taps). Per (tile, input channel) stage the producer warps stage
// the tile's window of cells as planes of 16-byte records -- a record is one cell's
// 8 phases of 16-bit operands (two phase rows of 4; bf16x3 keeps hi and lo planes)
// -- and a tap's A operand for 64 consecutive pixels is then 64 consecutive records,
// exactly a K-major run of 8 core matrices (conv1_wgmma.cuh). B (all channels and
// taps, packed once per CTA) stays resident. Per stage a warpgroup issues 9 taps x
// 1 (fp16/bf16, and float32 with allow_tf32, multiplied as fp16) or 3 (bf16x3,
// float32-accurate) wgmmas.
//
// The zero-weight taps (ky or kx = 11) multiply real input cells of the
// neighbouring pixels. A zero weight times an Inf or NaN input is NaN where
// F.conv2d has none, so for a tile whose windows hold any non-finite input the
// consumers skip their stores and the producers store it value by value
// (conv1_direct.cuh): exact, and only for such tiles. float32 multiplied as fp16
// sends the tiles fp16's range cannot hold the same way (see TileVotes).
#include "conv1_launch.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "../conv1_geometry.h"
#include "conv1_direct.cuh"
#include "conv1_dtype.cuh"
#include "conv1_epilogue.cuh"
#include "conv1_loads.cuh"
#include "conv1_mma.cuh"
#include "conv1_occupancy.cuh"
#include "conv1_pipeline.cuh"
#include "conv1_s2d_plan.h"
#include "conv1_tiling.h"
#include "conv1_tma.h"
#include "conv1_weights.cuh"

namespace alexconv {
namespace cuda {
namespace s2d {
namespace {

using mma::Round;

// A load unit: 2 phase rows x 4 phase columns of one cell (row pair j = 0 holds
// phases ry 0-1, j = 1 phases ry 2-3), value v = ry % 2 * 4 + rx: one record.
constexpr int kUnitValues = 8;
constexpr int kRecordBytes = 16;
constexpr int kPlaneBytes = kPlaneRecords * kRecordBytes;
// Load units per producer thread, a compile-time count so that a stage's units are
// straight-line code (a branch between units keeps the compiler from overlapping
// their loads): 6 for windows of up to 384 cells (224, 227, and smaller images, which
// then repeat some units), 7 up to 448 (256, 512), 8 any window.
constexpr int kMaxUnitsPerThread = (2 * kPlaneRecords + kProducerThreads - 1) / kProducerThreads;
constexpr int kFewestUnits = 6;
inline int units_per_thread(const Plan& plan) {
  const int units = int((2 * plan.cells + kProducerThreads - 1) / kProducerThreads);
  return std::max(units, kFewestUnits);
}

// What each mode stages and multiplies. K order within a (channel, tap) step of 16:
// k = 4 ry + rx, so each 8-k core matrix column is one row pair j (plane j).
template <class Mode>
struct Staged {
  using Raw = typename Mode::Raw;
  // bf16x3 stages each value as two (hi and lo planes) and keeps 166 KB of B.
  static constexpr bool kSplit = std::is_same_v<Mode, mma::Bf16x3>;
  // Planes of a slot: bf16x3 hi j0, hi j1, lo j0, lo j1; 16-bit operands j0, j1.
  static constexpr int kPlanes = kSplit ? 4 : 2;
  // Beside bf16x3's B two slots are what remains.
  static constexpr int kSlots = kSplit ? 2 : 4;
  static constexpr int kSlotBytes = kPlanes * kPlaneBytes;
  // TMA staging (inputs whose rows allow it): raw boxes land in their own slots and
  // the producers permute them into records. bf16x3 has no room.
  static constexpr int kRawSlots = kSplit ? 0 : 2;
  static constexpr int kRawSlotBytes = 8192 * int(sizeof(Raw));
  // Outputs of 16 bits leave through the staged epilogue, float32 ones straight.
  static constexpr bool kHalfOutputs = sizeof(Raw) == 2;
};
// Where the consumers run two accumulator sets (consume_overlapped), setmaxnreg
// moving registers from the producers (80) to them (144). Chosen per kernel by
// same-call A/B runs (perf-notes v22, v24):
// - TMA staging: the producers hold no loads in registers.
// - 16-bit element loads, up to 7 units per producer thread (1-2.4% faster).
// - float32 multiplied as fp16, element loads of 7 units (256, 512): 15-18% faster
//   than one set or 136 / 104 once v24 removed its spill. Its 6-unit kernel
//   stays at one set: either split made one of 227 and channels_last 224 2-7%
//   slower (v22, with a spill since removed; not measured again).
// - Elsewhere one set, 128 registers each (the launch bound): 8 units (not measured),
//   and bf16x3, 4.6% slower with two sets (its two slots let the producers run only
//   one stage ahead of an overlapped epilogue).
template <class Mode, bool kTma, int kUnits>
struct RegisterSplit {
  static constexpr bool kHalfMode =
      std::is_same_v<Mode, mma::Half<false>> || std::is_same_v<Mode, mma::Half<true>>;
  static constexpr bool kOverlap =
      kTma || (kHalfMode && kUnits < kMaxUnitsPerThread) ||
      (std::is_same_v<Mode, mma::HalfOfFloat> && kUnits == kMaxUnitsPerThread - 1);
  static constexpr int kConsumer = 144;
  static constexpr int kProducer = (65536 - kConsumerThreads * kConsumer) / kProducerThreads;
  static_assert(kProducer % 8 == 0, "setmaxnreg counts are multiples of 8");
};

// full: every producer thread arrived (window staged); empty: every consumer
// thread did (slot free). votes[tile parity]: what producer warp w staged into the
// tile's windows (TileVotes), in byte w; written before the arrival on `full` of the
// tile's last stage.
template <int kSlots>
struct Ring {
  uint64_t full[kSlots];
  uint64_t empty[kSlots];
  uint64_t landed[2];  // TMA staging: raw slot r's box has arrived
  uint32_t votes[2];   // byte w: producer warp w's TileVotes over a tile's windows
  uint32_t infinite_weights;  // the prologue's finding (see conv1_s2d_kernel)
};

template <class Mode>
struct SmemLayout {
  static constexpr size_t kB = size_t(kInChannels) * kTapSteps * Mode::kWgBlocks * wgmma::kBlockBytes;
  static constexpr size_t kTapsAt = kB;
  static constexpr size_t kBiasAt = kTapsAt + kTapSteps * 16;
  static constexpr size_t kRingAt = kBiasAt + kOutChannels * sizeof(float);
  static constexpr size_t kSlotsAt = (kRingAt + sizeof(Ring<Staged<Mode>::kSlots>) + 127) / 128 * 128;
  static constexpr size_t kRawAt = kSlotsAt + size_t(Staged<Mode>::kSlots) * Staged<Mode>::kSlotBytes;
  static constexpr size_t kStagedAt =
      kRawAt + size_t(Staged<Mode>::kRawSlots) * Staged<Mode>::kRawSlotBytes;
  static constexpr size_t kBoxOffsetsAt =
      kStagedAt +
      (Staged<Mode>::kHalfOutputs ? kConsumerWarps / 4 * kStagedElems * sizeof(uint16_t) : 0);
  // TMA staging: each producer thread's units' offsets in a box (see produce_tma).
  static constexpr size_t kTotal =
      kBoxOffsetsAt +
      (Staged<Mode>::kRawSlots > 0 ? kMaxUnitsPerThread * kProducerThreads * sizeof(uint32_t) : 0);
  static_assert(kRingAt % 8 == 0, "barriers stay aligned");
};

// Where a tile pixel lands: its output offset (-1: a virtual column or a row past
// the image) and coordinates.
struct Pixel {
  int64_t out = -1, oy = 0, ox = 0;
};
__device__ __forceinline__ Pixel place_pixel(const Plan& plan, const Tile& tile, const Problem& p,
                                             int local) {
  Pixel px;
  // v < tiles_per_strip * kTilePixels: 32 bits (kMaxIndex).
  const int64_t v = tile.v0 + local, oy = plan.by_wv.small(int(v)), x = v - oy * plan.wv;
  if (oy < plan.out_h && x < tile.width) {
    px.oy = oy;
    px.ox = tile.x0 + x;
    px.out = tile.n * p.out_stride[0] + oy * p.out_stride[2] + px.ox * p.out_stride[3];
  }
  return px;
}

// ---- producers --------------------------------------------------------------

// Load unit u of a window (row pair j = u / cells, cell u % cells): its first input
// row and column from the window's first (4y + 2j, 4x), and its (first) record's
// byte offset in a slot (row pair j starts at plane j).
struct Unit {
  int row, col, record;
};
// The record's offset alone: no division.
__device__ __forceinline__ int record_at(const Plan& plan, int u) {
  const int cells = int(plan.cells);
  // j * kPlaneBytes + cell * kRecordBytes, folded.
  const int pair_shift = kPlaneBytes - cells * kRecordBytes;
  return u * kRecordBytes + (u >= cells ? pair_shift : 0);
}
__device__ __forceinline__ Unit unit_at(const Plan& plan, int u) {
  const int cells = int(plan.cells), j = u >= cells, cell = u - j * cells;
  const int y = plan.by_wv.small(cell), x = cell - y * int(plan.wv);
  return {int(kStride) * y + 2 * j, int(kStride) * x, record_at(plan, u)};
}

// A producer thread's units are u = thread, thread + 128, ... below 2 * cells. Their
// places are the same every stage, yet in the element-load producers cheaper to work
// out again (a multiply-high, a shift, a few adds) than to keep: held across the loop
// they spill. The thread index goes through an empty asm each stage so the compiler
// cannot hoist them. (The TMA producers keep their box offsets in shared memory.)
__device__ __forceinline__ int opaque(int v) {
  asm volatile("" : "+r"(v));
  return v;
}
// Unit k of `thread`: past the window's last unit it repeats that one, so the code
// stays straight-line and in bounds; such a unit (not `owned`) loads nothing from
// global memory and writes no record.
struct ThreadUnit {
  Unit at;
  bool owned;
};
__device__ __forceinline__ ThreadUnit thread_unit(const Plan& plan, int thread, int k) {
  const int u = thread + k * kProducerThreads, last = 2 * int(plan.cells) - 1;
  return {unit_at(plan, min(u, last)), u <= last};
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
  const int row0 = int(tile.oy0 * kStride - kPad), col0 = int(tile.x0 * kStride - kPad);
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    const ThreadUnit unit = thread_unit(plan, thread, k);
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

// What a producer warp saw in a tile's windows, one byte per warp in Ring::votes.
// A tile is stored exactly (store_exact_tile) when a window holds Inf or NaN -- or,
// for float32 multiplied as fp16, a value fp16 cannot hold (rounded to Inf), or
// nothing of 2^-10 or more but something nonzero: fp16's subnormals below 2^-14
// keep fewer bits than TF32, which only matters where nothing larger dominates the
// outputs. Zeros alone are exact in fp16.
struct TileVotes {
  static constexpr uint32_t kExact = 1, kLarge = 2, kNonzero = 4;
  static constexpr uint32_t kEveryWarp = 0x01010101u;
  __device__ static bool exact(uint32_t votes) {
    return (votes & kExact * kEveryWarp) != 0 ||
           ((votes & kNonzero * kEveryWarp) != 0 && (votes & kLarge * kEveryWarp) == 0);
  }
};

// Watches packed 16-bit words for what TileVotes needs: the largest magnitude seen,
// two halves at a time (one 3-input max per two words on sm_90); and for float32
// multiplied as fp16 the OR of the float32 bits, which sees values that round to 0.
template <class Mode>
struct HalfMagnitudes {
  uint32_t largest = 0;
  uint32_t float_bits = 0;
  __device__ __forceinline__ void add(uint32_t word) { largest = __vmaxu2(largest, word & 0x7fff7fffu); }
  __device__ __forceinline__ uint32_t vote() const {
    constexpr uint32_t kInf = Mode::kIsBf16 ? 0x7f80u : 0x7c00u;
    constexpr uint32_t kLargeFloor = 0x1400u;  // 2^-10 in fp16
    const uint32_t top = max(largest & 0xffffu, largest >> 16);
    uint32_t vote = top >= kInf ? TileVotes::kExact : 0;
    if constexpr (std::is_same_v<Mode, mma::HalfOfFloat>) {
      vote |= (top >= kLargeFloor ? TileVotes::kLarge : 0) |
              ((float_bits & 0x7fffffffu) != 0 ? TileVotes::kNonzero : 0);
    }
    return vote;
  }
};

// Writes this thread's units as records into the slot's planes (in the MMA's
// operand format). Returns its TileVotes bits.
template <class Mode, Round kRound, int kUnits>
__device__ __forceinline__ uint32_t store_units(unsigned char* slot,
                                                const typename Mode::Raw (&v)[kUnits][kUnitValues],
                                                const Plan& plan, int thread) {
  float probe = 0.f;  // bf16x3: x * 0 + probe is NaN once some x is not finite
  HalfMagnitudes<Mode> halves;
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    const ThreadUnit unit = thread_unit(plan, thread, k);
    // Row pair j's plane: bf16x3 hi j, lo 2 + j; 16-bit j.
    const auto record = [&](int plane) {
      return reinterpret_cast<uint4*>(slot + unit.at.record + plane * kPlaneBytes);
    };
    if constexpr (std::is_same_v<Mode, mma::Bf16x3>) {
#pragma unroll
      for (int i = 0; i < kUnitValues; ++i) probe = fmaf(v[k][i], 0.f, probe);
      // The conversion is long enough that a repeated unit skips it.
      if (unit.owned) {
        uint32_t hi[4], lo[4];
#pragma unroll
        for (int w = 0; w < 4; ++w) mma::split_bf16x2(v[k][2 * w], v[k][2 * w + 1], hi[w], lo[w], kRound);
        *record(0) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
        *record(2) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
      }
    } else {
      uint32_t w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if constexpr (std::is_same_v<Mode, mma::HalfOfFloat>) {
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
    return probe != probe ? TileVotes::kExact : 0;
  } else {
    return halves.vote();
  }
}

// A tile TileVotes sends to the exact path, stored value by value (conv1_direct.cuh)
// by the producer threads while the consumers go on (they skip its stores): exact,
// and out of the consumers' code, where a branch to it serialises every wgmma
// (ptxas C7518). A call: its loops stay out of the producers' registers. (The
// kernel's parameters are __grid_constant__, so passing them by reference copies nothing.)
// The tile comes as its index, decoded here: the producers' loop then keeps none of
// its fields but what staging needs.
template <DType T>
__device__ __noinline__ void store_exact_tile(const Problem& p, const Plan& plan, int64_t index,
                                              int thread) {
  const Tile tile = decode_tile(plan, index);
  using S = typename Storage<T>::type;
  S* out = static_cast<S*>(p.output);
#pragma unroll 1
  for (int e = thread; e < kTilePixels * int(kOutChannels); e += kProducerThreads) {
    const int co = e / kTilePixels;  // consecutive threads, consecutive pixels
    const Pixel px = place_pixel(plan, tile, p, e % kTilePixels);
    if (px.out >= 0) {
      out[px.out + co * p.out_stride[1]] = from_float<T>(direct_output<T>(p, tile.n, co, px.oy, px.ox));
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
  // reduction measured the same for them, perf-notes v21).
  template <class Mode, int kSlots>
  __device__ void staged(uint32_t vote, bool last, Ring<kSlots>& ring, int warp, int lane) {
    if constexpr (std::is_same_v<Mode, mma::HalfOfFloat>) {
      seen |= __reduce_or_sync(0xffffffffu, vote);
    } else {
      seen |= __any_sync(0xffffffffu, vote != 0) ? TileVotes::kExact : 0;
    }
    if (last && lane == 0) reinterpret_cast<volatile uint8_t*>(&ring.votes[parity])[warp] = seen;
  }
  // After arriving on the `full` (at pos) of a tile's last stage.
  template <DType T, int kSlots>
  __device__ void finish(Ring<kSlots>& ring, RingPos<kSlots> pos, const Problem& p,
                         const Plan& plan, int64_t tile_index, int thread) {
    barrier_wait(&ring.full[pos.slot], pos.phase);  // every producer warp's byte is in
    if (TileVotes::exact(*reinterpret_cast<volatile uint32_t*>(&ring.votes[parity]))) {
      store_exact_tile<T>(p, plan, tile_index, thread);
    }
    seen = 0;
    parity ^= 1;
  }
};

// Producer warps: per stage, load the window's units into registers (in flight
// while the slot is still being read), then write its records once the slot is free.
template <class Mode, DType T, int kUnits>
__device__ void produce(const Problem& p, const Plan& plan, unsigned char* slots,
                        Ring<Staged<Mode>::kSlots>& ring, Round round, int warp, int lane) {
  using Raw = typename Mode::Raw;
  const int thread = warp * 32 + lane;
  Raw v[kUnits][kUnitValues];
  StageCursor<Plan> at(plan);
  RingPos<Staged<Mode>::kSlots> pos;
  ExactTiles exact;
  while (at.valid(plan)) {
    const int t = opaque(thread);
    load_units<kUnits>(v, p, plan, at.tile, at.channel, t);
    barrier_wait(&ring.empty[pos.slot], pos.phase ^ 1);
    unsigned char* slot = slots + pos.slot * Staged<Mode>::kSlotBytes;
    const uint32_t vote = round == Round::kNearest
                              ? store_units<Mode, Round::kNearest, kUnits>(slot, v, plan, t)
                              : store_units<Mode, Round::kTowardZero, kUnits>(slot, v, plan, t);
    const bool last = at.channel == kInChannels - 1;
    exact.staged<Mode>(vote, last, ring, warp, lane);
    fence_async_proxy();  // the records were written through the generic proxy; wgmma reads them
    barrier_arrive(&ring.full[pos.slot]);
    if (last) exact.finish<T>(ring, pos, p, plan, at.tile_index, thread);
    at.advance(plan);
    pos.advance();
  }
}

// Elements per 16 bytes, TMA's unit of alignment.
template <class Raw>
constexpr int kPerUnit = 16 / int(sizeof(Raw));
// The first input column of a tile's TMA box, 16-byte aligned (the hardware needs
// it), and how far into each box row the window's column 0 sits.
template <class Raw>
__device__ __forceinline__ int box_skew(const Tile& tile) {
  return int(((tile.x0 * kStride - kPad) % kPerUnit<Raw> + kPerUnit<Raw>) % kPerUnit<Raw>);
}
template <class Raw>
__device__ __forceinline__ void issue_box(uint32_t raw, const WindowMap* map, const Plan& plan,
                                          const Tile& tile, int channel, uint64_t* landed) {
  barrier_arrive_expect_bytes(landed, uint32_t(plan.box_rows * plan.box_cols * sizeof(Raw)));
  const int x = int(tile.x0 * kStride - kPad) - box_skew<Raw>(tile), y = int(tile.oy0 * kStride - kPad);
  if (plan.box_in_units) {
    tma_load_box_in_units(raw, map, x / kPerUnit<Raw>, y, channel, int(tile.n), landed);  // whole units
  } else {
    tma_load_box(raw, map, x, y, channel, int(tile.n), landed);
  }
}

// A record from a landed box: the unit's two rows of 4 elements from `first` on.
// 16-bit: four aligned 32-bit loads. float32 (multiplied as fp16): four aligned
// 8-byte loads (a float32 box row's window starts 8 bytes into a 16-byte unit),
// rounded to fp16 pairs; their bits are ORed into float_bits (HalfMagnitudes).
template <class Raw>
__device__ __forceinline__ uint4 box_record(const unsigned char* first, int row_bytes,
                                            uint32_t& float_bits) {
  if constexpr (sizeof(Raw) == 4) {
    const float2* row0 = reinterpret_cast<const float2*>(first);
    const float2* row1 = reinterpret_cast<const float2*>(first + row_bytes);
    const float2 a = row0[0], b = row0[1], c = row1[0], d = row1[1];
    const auto bits = [](float2 f) { return __float_as_uint(f.x) | __float_as_uint(f.y); };
    float_bits |= bits(a) | bits(b) | bits(c) | bits(d);
    return make_uint4(mma::pack_half2(a.x, a.y), mma::pack_half2(b.x, b.y),
                      mma::pack_half2(c.x, c.y), mma::pack_half2(d.x, d.y));
  } else {
    const uint32_t* row0 = reinterpret_cast<const uint32_t*>(first);
    const uint32_t* row1 = reinterpret_cast<const uint32_t*>(first + row_bytes);
    return make_uint4(row0[0], row0[1], row1[0], row1[1]);
  }
}

// Producer warps, TMA staging: one thread keeps two boxes in flight; all 128 permute
// each landed box into records (box_record; no global addresses or bound checks: the
// copy engine zero-filled what lies outside the input). A stage's shared loads all go
// out before its slot is awaited and written.
template <class Mode, DType T, int kUnits>
__device__ void produce_tma(const Problem& p, const Plan& plan, const WindowMap* map,
                            unsigned char* slots, const unsigned char* raw, uint32_t* box_offsets,
                            Ring<Staged<Mode>::kSlots>& ring, int warp, int lane) {
  using Raw = typename Mode::Raw;
  constexpr int kRawSlotBytes = Staged<Mode>::kRawSlotBytes;
  const int thread = warp * 32 + lane;
  const int row_bytes = int(plan.box_cols * sizeof(Raw));
  StageCursor<Plan> at(plan), copy(plan);
  RingPos<Staged<Mode>::kSlots> pos;
  RingPos<2> raw_pos, copy_pos;
  const auto issue_next = [&] {
    if (thread == 0 && copy.valid(plan)) {
      issue_box<Raw>(smem_address(raw + copy_pos.slot * kRawSlotBytes), map, plan, copy.tile,
                     copy.channel, &ring.landed[copy_pos.slot]);
    }
    copy.advance(plan);
    copy_pos.advance();
  };
  issue_next();
  issue_next();
  // A unit's first word in a box (from the skew on) is at the same offset every stage
  // but takes a division to find: worked out once, into shared memory (kept in
  // registers, the offsets push the producers past their 80), and read back by the
  // same thread each stage before its box is awaited.
  uint32_t* own_offsets = box_offsets + thread;  // unit k at [k * kProducerThreads]
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    const Unit unit = thread_unit(plan, thread, k).at;
    own_offsets[k * kProducerThreads] = unit.row * row_bytes + unit.col * int(sizeof(Raw));
  }
  const int last_unit = 2 * int(plan.cells) - 1;
  ExactTiles exact;
  while (at.valid(plan)) {
    uint32_t offset[kUnits];
#pragma unroll
    for (int k = 0; k < kUnits; ++k) offset[k] = own_offsets[k * kProducerThreads];
    barrier_wait(&ring.landed[raw_pos.slot], raw_pos.phase);
    // Box rows 4y + 2j and 4y + 2j + 1, columns skew + 4x .. + 3.
    const unsigned char* box =
        raw + raw_pos.slot * kRawSlotBytes + box_skew<Raw>(at.tile) * int(sizeof(Raw));
    HalfMagnitudes<Mode> halves;
    uint4 record[kUnits];
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
      record[k] = box_record<Raw>(box + offset[k], row_bytes, halves.float_bits);
    }
    barrier_wait(&ring.empty[pos.slot], pos.phase ^ 1);
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
    // the async proxy), and the box was read through it before a copy overwrites it.
    fence_async_proxy();
    producer_barrier();  // every producer is done with the box
    issue_next();
    barrier_arrive(&ring.full[pos.slot]);
    if (last) exact.finish<T>(ring, pos, p, plan, at.tile_index, thread);
    at.advance(plan);
    pos.advance();
    raw_pos.advance();
  }
}

// ---- consumers --------------------------------------------------------------

// One tap of one stage: acc += A (64 records, `a` 16-byte units into `window`) x B
// (the tap's blocks, `b` units into `weights`). A record is one unit.
template <class Mode>
__device__ __forceinline__ void multiply_tap(float (&acc)[mma::kNTiles][4], const wgmma::Operand& window,
                                             uint32_t a, const wgmma::Operand& weights, uint32_t b) {
  constexpr uint32_t kPlane = kPlaneRecords, kBlock = wgmma::kBlockUnits;
  if constexpr (std::is_same_v<Mode, mma::Bf16x3>) {
    // Small terms first, as in the register engine.
    wgmma::bf16_m64n96k16_ss(acc, window.at(a + 2 * kPlane), weights.at(b));
    wgmma::bf16_m64n96k16_ss(acc, window.at(a), weights.at(b + kBlock));
    wgmma::bf16_m64n96k16_ss(acc, window.at(a), weights.at(b));
  } else if constexpr (Mode::kIsBf16) {
    wgmma::bf16_m64n96k16_ss(acc, window.at(a), weights.at(b));
  } else {
    wgmma::f16_m64n96k16_ss(acc, window.at(a), weights.at(b));
  }
}

// The thread's accumulator rows g and g + 8.
struct Rows {
  Pixel px[2];
  int64_t out[kMTiles][2];
};
__device__ Rows thread_rows(const Plan& plan, const Tile& tile, const Problem& p, int warp, int g) {
  Rows r;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    r.px[h] = place_pixel(plan, tile, p, (warp >> 2) * 64 + (warp & 3) * 16 + h * 8 + g);
    r.out[0][h] = r.px[h].out;
  }
  return r;
}

// The consumer warps' side of the ring: per stage, 9 taps of MMAs on the slot's
// window; a stage's MMAs run while the next stage's are issued, and its slot is
// released once they are done. Every wgmma wait sits on a path the compiler can
// follow (the stage loops are unrolled): a wait under a data-dependent branch makes
// ptxas serialise every wgmma of the kernel (C7518). kPixelMajor: see kPixelMajorKernels.
template <class Mode, DType T, bool kPixelMajor>
struct Consumer {
  const Problem& p;
  const Plan& plan;
  Ring<Staged<Mode>::kSlots>& ring;
  const uint32_t slots, b_all;  // shared-memory addresses
  const float* bias;
  uint16_t* staged;
  const float unscale;  // mma::HalfOfFloat: B holds the weights times its inverse
  const int warp, lane;
  RingPos<Staged<Mode>::kSlots> pos;
  int in_flight = -1;  // the slot of the stage whose MMAs may still run
  int parity = 0;      // of the tile count

  // Issues stage (tile, channel)'s MMAs into acc, then releases the stage before it.
  // `base`: the tile's first pixel's cell in its window (Tile::base).
  __device__ __forceinline__ void stage(float (&acc)[kMTiles][mma::kNTiles][4], int base,
                                        int channel) {
    const uint32_t wv = uint32_t(plan.wv);
    barrier_wait(&ring.full[pos.slot], pos.phase);
    __syncwarp();  // the warpgroup-collective MMAs need the whole warp back together
    // Records are K-major core-matrix rows: planes kPlaneBytes apart, 8 pixels 128 bytes.
    const uint32_t starts = wgmma::uniform_starts(
        slots + pos.slot * Staged<Mode>::kSlotBytes + uint32_t(base + (warp >> 2) * 64) * kRecordBytes,
        b_all + channel * kTapSteps * Mode::kWgBlocks * wgmma::kBlockBytes);
    const auto window = wgmma::Operand::from_start(starts & 0xffffu, kPlaneBytes, 8 * kRecordBytes);
    const auto weights = wgmma::blocks_from_start(starts >> 16);
    wgmma::fence();
#pragma unroll
    for (int dy = 0; dy < kTaps1D; ++dy) {
#pragma unroll
      for (int dx = 0; dx < kTaps1D; ++dx) {
        multiply_tap<Mode>(acc[0], window, dy * wv + dx, weights,
                           (dy * kTaps1D + dx) * Mode::kWgBlocks * wgmma::kBlockUnits);
      }
    }
    wgmma::commit();
    if (in_flight >= 0) {
      wgmma::wait<1>();  // the previous stage's MMAs are done with its slot
      barrier_arrive(&ring.empty[in_flight]);
    }
    in_flight = pos.slot;
    pos.advance();
  }
  // Waits for the last stage's MMAs: acc is final and nothing is in flight.
  __device__ __forceinline__ void drain(float (&acc)[kMTiles][mma::kNTiles][4]) {
    wgmma::wait<0>();
    wgmma::fence_accumulators(acc[0]);
    barrier_arrive(&ring.empty[in_flight]);
    in_flight = -1;
  }
  // A tile's three stages into acc, which starts at zero (accumulators set from loaded
  // values before the wait loop make ptxas serialise every wgmma, C7520), the first
  // stage before `meanwhile` runs.
  template <class Meanwhile>
  __device__ __forceinline__ void multiply(float (&acc)[kMTiles][mma::kNTiles][4], int base,
                                           const Meanwhile& meanwhile) {
#pragma unroll
    for (int i = 0; i < mma::kNTiles; ++i) acc[0][i][0] = acc[0][i][1] = acc[0][i][2] = acc[0][i][3] = 0.f;
    stage(acc, base, 0);
    meanwhile();
#pragma unroll
    for (int channel = 1; channel < kInChannels; ++channel) stage(acc, base, channel);
    drain(acc);
  }
  // Adds the bias and stores a multiplied tile (the producers store one TileVotes
  // sends to the exact path: the votes are the same in every consumer thread, so
  // their group barriers match).
  __device__ __forceinline__ void store(float (&acc)[kMTiles][mma::kNTiles][4], const Tile& tile) {
    const bool exact = TileVotes::exact(ring.votes[parity]);
    parity ^= 1;
    if (exact) return;
    if constexpr (std::is_same_v<Mode, mma::HalfOfFloat>) {
#pragma unroll
      for (int nt = 0; nt < mma::kNTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[0][nt][e] *= unscale;  // a power of two: exact
      }
    }
    add_bias(acc, bias, lane & 3);
    if constexpr (Staged<Mode>::kHalfOutputs) {
      store_tile_staged<T>(acc, staged, p, warp, lane, kPixelMajor,
                           [&](int local) { return place_pixel(plan, tile, p, local).out; });
    } else {
      store_tile(acc, thread_rows(plan, tile, p, warp, lane >> 2).out, p, lane & 3,
                 p.out_pixel_major);
    }
  }
};

// Consumer warps, one accumulator set: multiply a tile, store it, next.
template <class Mode, DType T, bool kPixelMajor>
__device__ void consume(Consumer<Mode, T, kPixelMajor> c) {
  for (int64_t index = blockIdx.x; index < c.plan.tiles; index += gridDim.x) {
    const Tile tile = decode_tile(c.plan, index);
    float acc[kMTiles][mma::kNTiles][4];
    c.multiply(acc, int(tile.base), [] {});
    c.store(acc, tile);
  }
}

// Consumer warps, two accumulator sets (where RegisterSplit gives them the
// registers): a tile's first stage of MMAs runs while the tile before it is
// stored, so the tensor cores do not wait out the whole epilogue. Tiles are kept as
// indices and decoded where needed: the registers go to the accumulators.
template <class Mode, DType T, bool kPixelMajor>
__device__ void consume_overlapped(Consumer<Mode, T, kPixelMajor> c) {
  using Acc = float[kMTiles][mma::kNTiles][4];
  const auto base_of = [&](int64_t index) { return int(decode_tile(c.plan, index).base); };
  // Multiplies tile `index` into `next` while `done` (the tile before) is stored.
  const auto step = [&](Acc& next, Acc& done, int64_t index) {
    c.multiply(next, base_of(index), [&] { c.store(done, decode_tile(c.plan, index - gridDim.x)); });
  };
  int64_t index = blockIdx.x;
  if (index >= c.plan.tiles) return;
  Acc acc0, acc1;
  c.multiply(acc0, base_of(index), [] {});
  // The sets alternate: the loop is unrolled by two so that each is a fixed array
  // (register-allocated), and every wgmma wait stays on a path ptxas can follow.
  bool last_in_0 = true;  // which set holds the last multiplied tile
  while (index + gridDim.x < c.plan.tiles) {
    step(acc1, acc0, index += gridDim.x);
    last_in_0 = false;
    if (index + gridDim.x >= c.plan.tiles) break;
    step(acc0, acc1, index += gridDim.x);
    last_in_0 = true;
  }
  // Nothing is in flight here; `index` is the last tile.
  const Tile tile = decode_tile(c.plan, index);
  if (last_in_0) {
    c.store(acc0, tile);
  } else {
    c.store(acc1, tile);
  }
}

// ---- the kernel ---------------------------------------------------------------

// The K order of a (channel, tap) step as conv1_weights.cuh's table: k = 4 ry + rx
// multiplies tap (4 dy + ry, 4 dx + rx), a zero weight past the kernel.
__device__ __forceinline__ uint8_t step_tap(int step, int k) {
  const int ky = (step / kTaps1D) * kStride + k / kStride;
  const int kx = (step % kTaps1D) * kStride + k % kStride;
  return uint8_t(ky < kKernel && kx < kKernel ? ky * kKernel + kx : kTapsPerChannel);
}

// Channels-last 16-bit outputs (Problem::out_pixel_major) get kernels of their own
// (kPixelMajor): with both staged epilogues in one consumer loop, or both loops in
// one kernel, ptxas spilled the shared-memory base in the 16-bit kernels with two
// accumulator sets, and NCHW fp16 ran 8-9% slower (perf-notes v23). float32
// outputs branch at run time (store_tile): no spill there.
template <class Mode>
constexpr bool kPixelMajorKernels = Staged<Mode>::kHalfOutputs;

template <class Mode, DType T, bool kTma, int kUnits, bool kPixelMajor>
__global__ void __launch_bounds__(kTileThreads, 1)
    conv1_s2d_kernel(const __grid_constant__ Problem p, const __grid_constant__ Plan plan,
                     const __grid_constant__ WindowMap map) {
  using Layout = SmemLayout<Mode>;
  using Raw = typename Mode::Raw;
  using Split = RegisterSplit<Mode, kTma, kUnits>;
  constexpr int kSlots = Staged<Mode>::kSlots;
  static_assert(std::is_same_v<Raw, typename Storage<T>::type>, "mode matches dtype");
  static_assert(!kPixelMajor || kPixelMajorKernels<Mode>, "float32 outputs branch at run time");
  static_assert(kOutChannels * kTapsPerChannel * sizeof(Raw) <= size_t(kSlots) * Staged<Mode>::kSlotBytes,
                "a channel's raw weights fit in the window slots");
  extern __shared__ __align__(16) unsigned char smem[];
  uint4* b_all = reinterpret_cast<uint4*>(smem);
  uint8_t* k_taps = smem + Layout::kTapsAt;
  float* bias = reinterpret_cast<float*>(smem + Layout::kBiasAt);
  Ring<kSlots>& ring = *reinterpret_cast<Ring<kSlots>*>(smem + Layout::kRingAt);
  unsigned char* slots = smem + Layout::kSlotsAt;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (tid == 0) {
    for (int s = 0; s < kSlots; ++s) {
      barrier_init(&ring.full[s], kProducerThreads);
      barrier_init(&ring.empty[s], kConsumerThreads);
    }
    for (int r = 0; r < 2; ++r) barrier_init(&ring.landed[r], 1);
    barrier_init_fence();
  }
  if (tid < kTapSteps * 16) k_taps[tid] = step_tap(tid / 16, tid % 16);
  if (tid < kOutChannels) {
    const Raw* b = static_cast<const Raw*>(p.bias);
    bias[tid] = b ? to_float<T>(b[tid * p.bias_stride]) : 0.f;
  }
  // float32 multiplied as fp16: B holds the weights times a power of two (its
  // barrier publishes the ring, k_taps and the bias; the raw slots, free until the
  // first box lands, are its scratch).
  WeightScale weight_scale;
  if constexpr (std::is_same_v<Mode, mma::HalfOfFloat>) {
    weight_scale = half_weight_scale(p, reinterpret_cast<uint32_t*>(smem + Layout::kRawAt), tid);
  }
  // The window slots are free until the producers start: scratch for raw weights.
  // Its first barrier publishes the ring, k_taps and the bias.
  const bool infinite_weight = pack_weights<Mode, true, kTapSteps>(
      p, k_taps, b_all, reinterpret_cast<Raw*>(slots), tid, weight_scale.scale);
  // B was written through the generic proxy; the tensor cores read it through the async proxy.
  fence_async_proxy();
  // Infinite weights make inputs split toward zero (see mma::Round). Ends in a CTA barrier.
  const bool any_infinite = __syncthreads_or(infinite_weight);
  const Round round = any_infinite ? Round::kTowardZero : Round::kNearest;
  // Every warp records the result before the roles part: with the result used by the
  // producers only, ptxas may give each role its own copy of the barrier (BAR.RED),
  // the shape of build that hung (scripts/check_barriers.sh).
  if (lane == 0) ring.infinite_weights = any_infinite;
  if (warp < kConsumerWarps) {
    const Consumer<Mode, T, kPixelMajor> consumer{
        p, plan, ring, smem_address(slots), smem_address(smem), bias,
        reinterpret_cast<uint16_t*>(smem + Layout::kStagedAt), weight_scale.inverse, warp, lane};
    if constexpr (Split::kOverlap) {
      wgmma::setmaxnreg_inc<Split::kConsumer>();
      consume_overlapped(consumer);
    } else {
      consume(consumer);
    }
  } else {
    if constexpr (Split::kOverlap) wgmma::setmaxnreg_dec<Split::kProducer>();
    if constexpr (kTma) {
      static_assert(Staged<Mode>::kRawSlots == 2, "TMA staging has its raw slots");
      produce_tma<Mode, T, kUnits>(p, plan, &map, slots, smem + Layout::kRawAt,
                                   reinterpret_cast<uint32_t*>(smem + Layout::kBoxOffsetsAt), ring,
                                   warp - kConsumerWarps, lane);
    } else {
      produce<Mode, T, kUnits>(p, plan, slots, ring, round, warp - kConsumerWarps, lane);
    }
  }
}

template <class Mode>
constexpr size_t smem_bytes() {
  return SmemLayout<Mode>::kTotal;
}

template <class Mode, DType T, bool kTma, int kUnits, bool kPixelMajor>
cudaError_t launch_layout(const Problem& p, const Plan& plan, const WindowMap& map,
                          const DeviceInfo& device, cudaStream_t stream) {
  constexpr auto kernel = conv1_s2d_kernel<Mode, T, kTma, kUnits, kPixelMajor>;
  int per_sm = 0;
  const cudaError_t err = resident_ctas_per_sm<kernel>(smem_bytes<Mode>(), kTileThreads, per_sm);
  if (err != cudaSuccess) return err;
  const int64_t grid = std::min<int64_t>(plan.tiles, int64_t(per_sm) * device.sm_count);
  kernel<<<unsigned(grid), kTileThreads, smem_bytes<Mode>(), stream>>>(p, plan, map);
  return cudaSuccess;  // launch errors: C10_CUDA_KERNEL_LAUNCH_CHECK in the caller
}

template <class Mode, DType T, bool kTma, int kUnits>
cudaError_t launch_kernel(const Problem& p, const Plan& plan, const WindowMap& map,
                          const DeviceInfo& device, cudaStream_t stream) {
  if constexpr (kPixelMajorKernels<Mode>) {
    if (p.out_pixel_major) return launch_layout<Mode, T, kTma, kUnits, true>(p, plan, map, device, stream);
  }
  return launch_layout<Mode, T, kTma, kUnits, false>(p, plan, map, device, stream);
}

// TMA staging for the modes with raw slots (16-bit inputs, float32 with allow_tf32):
// rows unit-stride and 16-byte aligned, and a box of every window (its rows x the
// virtual width's columns plus the alignment skew) that fits a raw slot. A box wider
// than TMA's 256 elements per dimension goes through the map of 16-byte units
// (encode_window_map_in_units), where rows are whole units.
struct Box {
  int64_t cols = 0, rows = 0;
  bool in_units = false;
};
// Whether TMA staging applies, and the box.
bool tma_box(const Problem& p, const Plan& plan, Box& box) {
  if (p.dtype == DType::kFloat32 && !p.allow_tf32) return false;  // bf16x3: no raw slots
  const int64_t elem = element_bytes(p.dtype);
  const int64_t per_unit = 16 / elem;  // elements per 16 bytes
  constexpr int64_t kMaxBoxDim = 256;
  const bool aligned = p.in_stride[3] == 1 && reinterpret_cast<uintptr_t>(p.input) % 16 == 0 &&
                       p.in_stride[2] % per_unit == 0 && p.in_stride[1] % per_unit == 0 &&
                       p.in_stride[0] % per_unit == 0;
  // The skew (box_skew) is at most per_unit - 2: the window starts 2 columns before a cell.
  box.cols = (per_unit - 2 + kStride * plan.wv + per_unit - 1) / per_unit * per_unit;
  box.rows = kStride * ((plan.cells + plan.wv - 1) / plan.wv);
  box.in_units = box.cols > kMaxBoxDim;
  // float32 boxes in units measured slower than element loads (256, 512: 1.01-1.50x;
  // perf-notes v21): 16-byte units are twice as many per box as for 16-bit elements.
  const bool units_ok = p.in_w % per_unit == 0 && box.cols / per_unit <= kMaxBoxDim && elem == 2;
  const int64_t raw_slot_bytes = elem == 4 ? Staged<mma::HalfOfFloat>::kRawSlotBytes
                                           : Staged<mma::Half<false>>::kRawSlotBytes;
  return aligned && (!box.in_units || units_ok) && box.rows <= kMaxBoxDim &&
         box.cols * box.rows * elem <= raw_slot_bytes;
}

// Sets the plan's box and encodes `map` where TMA staging applies.
bool make_tma_plan(const Problem& p, Plan& plan, WindowMap& map) {
  Box box;
  if (!tma_box(p, plan, box)) return false;
  const bool encoded = box.in_units ? encode_window_map_in_units(p, box.cols, box.rows, map)
                                    : encode_window_map(p, box.cols, box.rows, map);
  if (!encoded) return false;
  plan.box_cols = box.cols;
  plan.box_rows = box.rows;
  plan.box_in_units = box.in_units;
  return true;
}

template <class Mode, DType T, int kUnits>
cudaError_t launch_staged(const Problem& p, Plan& plan, const DeviceInfo& device,
                          cudaStream_t stream) {
  WindowMap map{};  // read by TMA kernels only
  if constexpr (Staged<Mode>::kRawSlots > 0) {
    if (make_tma_plan(p, plan, map)) {
      return launch_kernel<Mode, T, true, kUnits>(p, plan, map, device, stream);
    }
  }
  return launch_kernel<Mode, T, false, kUnits>(p, plan, map, device, stream);
}

template <class Mode, DType T>
cudaError_t launch_typed(const Problem& p, const DeviceInfo& device, cudaStream_t stream) {
  Plan plan = make_plan(p.batch, p.out_h, p.out_w);
  if (plan.strips == 0) return cudaErrorInvalidValue;  // callers ask s2d_supported first
  if (plan.tiles == 0) return cudaSuccess;
  static_assert(kMaxUnitsPerThread == kFewestUnits + 2, "one launch per unit count");
  switch (units_per_thread(plan)) {
    case kFewestUnits: return launch_staged<Mode, T, kFewestUnits>(p, plan, device, stream);
    case kFewestUnits + 1: return launch_staged<Mode, T, kFewestUnits + 1>(p, plan, device, stream);
    default: return launch_staged<Mode, T, kMaxUnitsPerThread>(p, plan, device, stream);
  }
}

size_t smem_bytes_for(const Problem& p) {
  switch (p.dtype) {
    case DType::kFloat32:
      return p.allow_tf32 ? smem_bytes<mma::HalfOfFloat>() : smem_bytes<mma::Bf16x3>();
    case DType::kFloat16: return smem_bytes<mma::Half<false>>();
    case DType::kBFloat16: return smem_bytes<mma::Half<true>>();
  }
  return ~size_t(0);
}

// The plan, where this device and build can run the kernel at all (strips == 0: not).
Plan plan_on(const Problem& p, const DeviceInfo& device) {
  if (!wgmma_available(device) || smem_bytes_for(p) > device.max_smem_per_block_optin) return {};
  return make_plan(p.batch, p.out_h, p.out_w);
}

}  // namespace
}  // namespace s2d

bool s2d_supported(const Problem& p, const DeviceInfo& device) {
  return s2d::plan_on(p, device).strips > 0;
}

bool s2d_preferred(const Problem& p, const DeviceInfo& device) {
  const s2d::Plan plan = s2d::plan_on(p, device);
  if (!device.allow_wgmma || plan.strips == 0) return false;
  // What the register-gather engine would do instead, and where this kernel wins
  // (H200; docs/perf-notes.md v13-v15 for contiguous inputs at batch >= 64, v17 for
  // small batches and other strides).
  const WindowStaging other = igemm_window_staging(p, device);
  const bool unit_stride = p.in_stride[3] == 1;
  // Its tiles are 192 pixels; small batches keep the other engine, whose plan spreads
  // them over more CTAs -- unless it loads 16-bit unit-stride rows element by element
  // (rows not 4-byte aligned, as at 227): there this kernel takes 0.52-0.61x the time
  // at batch 1-8.
  if (plan.tiles < s2d::kMinTilesPerSm * device.sm_count) {
    return p.dtype != DType::kFloat32 && other == WindowStaging::kRegisters && unit_stride;
  }
  // float32 with allow_tf32: multiplied as fp16 here, TF32 there (perf-notes v21).
  if (p.dtype == DType::kFloat32 && p.allow_tf32) return true;
  // float32: wherever the other engine has no TMA copy: unit-stride rows it copies
  // otherwise (227, 512), and other W strides (channels_last: 0.83x the time since
  // both engines store channels-last outputs along channels, perf-notes v23).
  // With TMA (224, 256) the other engine is faster.
  if (p.dtype == DType::kFloat32) return other != WindowStaging::kTma;
  // 16-bit: where this kernel stages by TMA (224, 256, 512), or the other one loads
  // elements (227, channels_last: 0.82-0.85x) or 4-byte pairs (0.95x).
  s2d::Box box;
  return other == WindowStaging::kRegisters || other == WindowStaging::kCopy4 ||
         s2d::tma_box(p, plan, box);
}

cudaError_t launch_conv1_s2d(const Problem& p, const DeviceInfo& device, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::kFloat32:
      return p.allow_tf32 ? s2d::launch_typed<mma::HalfOfFloat, DType::kFloat32>(p, device, stream)
                          : s2d::launch_typed<mma::Bf16x3, DType::kFloat32>(p, device, stream);
    case DType::kFloat16:
      return s2d::launch_typed<mma::Half<false>, DType::kFloat16>(p, device, stream);
    case DType::kBFloat16:
      return s2d::launch_typed<mma::Half<true>, DType::kBFloat16>(p, device, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace alexconv
