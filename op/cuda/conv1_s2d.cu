// The space-to-depth implicit GEMM (Hopper, sm_90a): both wgmma operands come
// straight from shared memory, so the consumer warps issue MMAs and nothing else.
//
// conv1_s2d_plan.h folds the stride into 16 phases per input channel, making the
// layer a 3x3 stride-1 convolution (K = 3 channels x 9 taps x 16 phases = 432, of
// which 363 are real taps). Per (tile, input channel) stage the producer warps stage
// the tile's window of cells as planes of 16-byte records -- a record is one cell's
// 8 phases (16-bit operands: two phase rows of 4) or 4 phases (tf32: one phase row)
// -- and a tap's A operand for 64 consecutive pixels is then 64 consecutive records,
// exactly a K-major run of 8 core matrices (conv1_wgmma.cuh). B (all channels and
// taps, packed once per CTA) stays resident. Per stage a warpgroup issues 9 taps x
// 1 (fp16/bf16), 2 (tf32) or 3 (bf16x3, float32-accurate) wgmmas.
//
// The zero-weight taps (ky or kx = 11) multiply real input cells of the
// neighbouring pixels. A zero weight times an Inf or NaN input is NaN where
// F.conv2d has none, so for a tile whose windows hold any non-finite input the
// consumers skip their stores and the producers store it value by value
// (conv1_direct.cuh): exact, and only for such tiles.
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
// phases ry 0-1, j = 1 phases ry 2-3), value v = ry % 2 * 4 + rx.
constexpr int kUnitValues = 8;
constexpr int kRecordBytes = 16;
constexpr int kPlaneBytes = kPlaneRecords * kRecordBytes;
constexpr int kMaxUnitsPerThread = (2 * kPlaneRecords + kProducerThreads - 1) / kProducerThreads;

// What each mode stages and multiplies. K order within a (channel, tap) step of 16:
// k = 4 ry + rx, so each 8-k core matrix column is one row pair j.
template <class Mode>
struct Staged {
  static constexpr bool kFloat = sizeof(typename Mode::Raw) == 4;
  // Planes of a slot: bf16x3 hi j0, hi j1, lo j0, lo j1; tf32 one per phase row ry;
  // 16-bit j0, j1.
  static constexpr int kPlanes = kFloat ? 4 : 2;
  // Float32 modes keep 166 KB of B; two slots are what remains.
  static constexpr int kSlots = kFloat ? 2 : 4;
  static constexpr int kSlotBytes = kPlanes * kPlaneBytes;
  // TMA staging (16-bit inputs whose rows allow it): raw boxes land in their own
  // slots and the producers permute them into records. Float32 modes have no room.
  static constexpr int kRawSlots = kFloat ? 0 : 2;
};
constexpr int kRawSlotBytes = 16384;

// full: every producer thread arrived (window staged); empty: every consumer
// thread did (slot free). nonfinite[tile parity]: byte w set when producer warp w
// staged an Inf or NaN into one of the tile's windows; written before the arrival on
// `full` of the tile's last stage.
template <int kSlots>
struct Ring {
  uint64_t full[kSlots];
  uint64_t empty[kSlots];
  uint64_t landed[2];  // TMA staging: raw slot r's box has arrived
  uint32_t nonfinite[2];
};

template <class Mode>
struct SmemLayout {
  static constexpr size_t kB = size_t(kInChannels) * kTapSteps * Mode::kWgBlocks * wgmma::kBlockBytes;
  static constexpr size_t kTapsAt = kB;
  static constexpr size_t kBiasAt = kTapsAt + kTapSteps * 16;
  static constexpr size_t kRingAt = kBiasAt + kOutChannels * sizeof(float);
  static constexpr size_t kSlotsAt = (kRingAt + sizeof(Ring<Staged<Mode>::kSlots>) + 127) / 128 * 128;
  static constexpr size_t kRawAt = kSlotsAt + size_t(Staged<Mode>::kSlots) * Staged<Mode>::kSlotBytes;
  static constexpr size_t kStagedAt = kRawAt + size_t(Staged<Mode>::kRawSlots) * kRawSlotBytes;
  static constexpr bool kStagedStores = !Staged<Mode>::kFloat;
  static constexpr size_t kTotal =
      kStagedAt + (kStagedStores ? kConsumerWarps / 4 * kStagedElems * sizeof(uint16_t) : 0);
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
  const int64_t v = tile.v0 + local, oy = plan.by_wv(v), x = v - oy * plan.wv;
  if (oy < plan.out_h && x < tile.width) {
    px.oy = oy;
    px.ox = tile.x0 + x;
    px.out = tile.n * p.out_stride[0] + oy * p.out_stride[2] + px.ox * p.out_stride[3];
  }
  return px;
}

// ---- producers --------------------------------------------------------------

// Load unit u of a window: row pair j = u / cells, cell r = u % cells.
struct UnitPlace {
  int j, cell;
};
__device__ __forceinline__ UnitPlace unit_place(int u, int cells) {
  const int j = u >= cells;
  return {j, u - j * cells};
}

// Issues the loads of this thread's units (u = thread, thread + 128, ...) of the
// window of (tile, channel); any strides. Padding and cells past the image load 0.
template <class Raw>
__device__ __forceinline__ void load_units(Raw (&v)[kMaxUnitsPerThread][kUnitValues],
                                           const Problem& p, const Plan& plan, const Tile& tile,
                                           int channel, int thread) {
  const Raw* image = static_cast<const Raw*>(p.input) + tile.n * p.in_stride[0] +
                     channel * p.in_stride[1];
  const int cells = int(plan.cells);
  const unsigned height = unsigned(p.in_h), width = unsigned(p.in_w);
#pragma unroll
  for (int k = 0; k < kMaxUnitsPerThread; ++k) {
    const int u = thread + k * kProducerThreads;
    if (u >= 2 * cells) break;
    const UnitPlace at = unit_place(u, cells);
    const int64_t y = plan.by_wv(at.cell), x = at.cell - y * plan.wv;
    // Negative coordinates wrap to huge unsigned values: one compare per bound.
    const int iy = int((tile.oy0 + y) * kStride - kPad) + 2 * at.j;
    const int ix = int((tile.x0 + x) * kStride - kPad);
    const Raw* row = image + int64_t(iy) * p.in_stride[2] + int64_t(ix) * p.in_stride[3];
#pragma unroll
    for (int ry = 0; ry < 2; ++ry) {
      const bool row_ok = unsigned(iy + ry) < height;
#pragma unroll
      for (int rx = 0; rx < 4; ++rx) {
        v[k][ry * 4 + rx] = load_or_zero(row + ry * p.in_stride[2] + rx * p.in_stride[3],
                                         row_ok && unsigned(ix + rx) < width);
      }
    }
  }
}

// Whether a word of two packed 16-bit values holds an Inf or NaN (all-ones exponent).
template <class Mode>
__device__ __forceinline__ uint32_t nonfinite_halves(uint32_t word) {
  constexpr uint32_t kExponents = Mode::kIsBf16 ? 0x7f807f80u : 0x7c007c00u;
  return __vcmpeq2(word & kExponents, kExponents);
}

// Writes this thread's units as records into the slot's planes (in the MMA's
// operand format). Returns whether one of them holds an Inf or NaN.
template <class Mode, Round kRound>
__device__ __forceinline__ bool store_units(
    unsigned char* slot, const typename Mode::Raw (&v)[kMaxUnitsPerThread][kUnitValues],
    const Plan& plan, int thread) {
  const int cells = int(plan.cells);
  const auto record = [&](int plane, int cell) {
    return reinterpret_cast<uint4*>(slot + plane * kPlaneBytes + cell * kRecordBytes);
  };
  float probe = 0.f;      // float32: x * 0 + probe is NaN once some x is not finite
  uint32_t special = 0;   // 16-bit: all-ones exponents
#pragma unroll
  for (int k = 0; k < kMaxUnitsPerThread; ++k) {
    const int u = thread + k * kProducerThreads;
    if (u >= 2 * cells) break;
    const UnitPlace at = unit_place(u, cells);
    if constexpr (Staged<Mode>::kFloat) {
#pragma unroll
      for (int i = 0; i < kUnitValues; ++i) probe = fmaf(v[k][i], 0.f, probe);
    }
    if constexpr (std::is_same_v<Mode, mma::Bf16x3>) {
      uint32_t hi[4], lo[4];
#pragma unroll
      for (int w = 0; w < 4; ++w) mma::split_bf16x2(v[k][2 * w], v[k][2 * w + 1], hi[w], lo[w], kRound);
      *record(at.j, at.cell) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
      *record(2 + at.j, at.cell) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
    } else if constexpr (std::is_same_v<Mode, mma::Tf32>) {
#pragma unroll
      for (int ry = 0; ry < 2; ++ry) {
        *record(2 * at.j + ry, at.cell) =
            make_uint4(mma::to_tf32(v[k][4 * ry]), mma::to_tf32(v[k][4 * ry + 1]),
                       mma::to_tf32(v[k][4 * ry + 2]), mma::to_tf32(v[k][4 * ry + 3]));
      }
    } else {
      uint32_t w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) w[i] = mma::pack_u16(v[k][2 * i], v[k][2 * i + 1]);
#pragma unroll
      for (int i = 0; i < 4; ++i) special |= nonfinite_halves<Mode>(w[i]);
      *record(at.j, at.cell) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
  return probe != probe || special != 0;
}

// A tile whose windows hold Inf or NaN, stored value by value (conv1_direct.cuh) by
// the producer threads while the consumers go on (they skip its stores): exact,
// and out of the consumers' code, where a branch to it serialises every wgmma
// (ptxas C7518). A call: its loops stay out of the producers' registers. (The
// kernel's parameters are __grid_constant__, so passing them by reference copies nothing.)
template <DType T>
__device__ __noinline__ void store_exact_tile(const Problem& p, const Plan& plan, Tile tile,
                                              int thread) {
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

// The producers' side of the Inf/NaN rule: each warp ORs what it staged over a
// tile's windows and publishes its byte before the tile's last arrival on `full`;
// once every warp's byte is in, the producers store a flagged tile exactly.
struct NonfiniteTiles {
  bool seen = false;  // warp-uniform
  int parity = 0;     // of the tile count
  // After staging a stage's records, before arriving on its `full`.
  template <int kSlots>
  __device__ void staged(bool nonfinite, bool last, Ring<kSlots>& ring, int warp, int lane) {
    seen |= __any_sync(0xffffffffu, nonfinite);
    if (last && lane == 0) reinterpret_cast<volatile uint8_t*>(&ring.nonfinite[parity])[warp] = seen;
  }
  // After arriving on the `full` (at pos) of a tile's last stage.
  template <DType T, int kSlots>
  __device__ void finish(Ring<kSlots>& ring, RingPos<kSlots> pos, const Problem& p,
                         const Plan& plan, const Tile& tile, int thread) {
    barrier_wait(&ring.full[pos.slot], pos.phase);  // every producer warp's byte is in
    if (*reinterpret_cast<volatile uint32_t*>(&ring.nonfinite[parity]) != 0) {
      store_exact_tile<T>(p, plan, tile, thread);
    }
    seen = false;
    parity ^= 1;
  }
};

// Producer warps: per stage, load the window's units into registers (in flight
// while the slot is still being read), then write its records once the slot is free.
template <class Mode, DType T>
__device__ void produce(const Problem& p, const Plan& plan, unsigned char* slots,
                        Ring<Staged<Mode>::kSlots>& ring, Round round, int warp, int lane) {
  using Raw = typename Mode::Raw;
  const int thread = warp * 32 + lane;
  Raw v[kMaxUnitsPerThread][kUnitValues];
  StageCursor<Plan> at(plan);
  RingPos<Staged<Mode>::kSlots> pos;
  NonfiniteTiles flags;
  while (at.valid(plan)) {
    load_units(v, p, plan, at.tile, at.channel, thread);
    barrier_wait(&ring.empty[pos.slot], pos.phase ^ 1);
    unsigned char* slot = slots + pos.slot * Staged<Mode>::kSlotBytes;
    const bool nonfinite = round == Round::kNearest
                               ? store_units<Mode, Round::kNearest>(slot, v, plan, thread)
                               : store_units<Mode, Round::kTowardZero>(slot, v, plan, thread);
    const bool last = at.channel == kInChannels - 1;
    flags.staged(nonfinite, last, ring, warp, lane);
    fence_async_proxy();  // the records were written through the generic proxy; wgmma reads them
    barrier_arrive(&ring.full[pos.slot]);
    if (last) flags.finish<T>(ring, pos, p, plan, at.tile, thread);
    at.advance(plan);
    pos.advance();
  }
}

// The first input column of a tile's TMA box, 16-byte aligned (the hardware needs
// it), and how far into each box row the window's column 0 sits.
__device__ __forceinline__ int box_skew(const Tile& tile) {
  return int(((tile.x0 * kStride - kPad) % 8 + 8) % 8);  // 8 16-bit elements per 16 bytes
}
__device__ __forceinline__ void issue_box(uint32_t raw, const WindowMap* map, const Plan& plan,
                                          const Tile& tile, int channel, uint64_t* landed) {
  barrier_arrive_expect_bytes(landed, uint32_t(plan.box_rows * plan.box_cols * sizeof(uint16_t)));
  tma_load_box(raw, map, int(tile.x0 * kStride - kPad) - box_skew(tile),
               int(tile.oy0 * kStride - kPad), channel, int(tile.n), landed);
}

// Producer warps, TMA staging: one thread keeps two boxes in flight; all 128 permute
// each landed box into records (4 aligned 32-bit shared loads per record, no global
// addresses or bound checks: the copy engine zero-filled what lies outside the input).
template <class Mode, DType T>
__device__ void produce_tma(const Problem& p, const Plan& plan, const WindowMap* map,
                            unsigned char* slots, const unsigned char* raw,
                            Ring<Staged<Mode>::kSlots>& ring, int warp, int lane) {
  const int thread = warp * 32 + lane;
  const int cells = int(plan.cells), pitch = int(plan.box_cols);
  StageCursor<Plan> at(plan), copy(plan);
  RingPos<Staged<Mode>::kSlots> pos;
  RingPos<2> raw_pos, copy_pos;
  const auto issue_next = [&] {
    if (thread == 0 && copy.valid(plan)) {
      issue_box(smem_address(raw + copy_pos.slot * kRawSlotBytes), map, plan, copy.tile,
                copy.channel, &ring.landed[copy_pos.slot]);
    }
    copy.advance(plan);
    copy_pos.advance();
  };
  issue_next();
  issue_next();
  NonfiniteTiles flags;
  while (at.valid(plan)) {
    barrier_wait(&ring.landed[raw_pos.slot], raw_pos.phase);
    barrier_wait(&ring.empty[pos.slot], pos.phase ^ 1);
    const unsigned char* box = raw + raw_pos.slot * kRawSlotBytes;
    unsigned char* slot = slots + pos.slot * Staged<Mode>::kSlotBytes;
    const int skew = box_skew(at.tile);
    uint32_t special = 0;
#pragma unroll
    for (int k = 0; k < kMaxUnitsPerThread; ++k) {
      const int u = thread + k * kProducerThreads;
      if (u >= 2 * cells) break;
      const UnitPlace unit = unit_place(u, cells);
      const int y = int(plan.by_wv(unit.cell)), x = unit.cell - y * int(plan.wv);
      // Box row 4y + 2j (+1), columns skew + 4x .. + 3: two 32-bit words per row.
      const uint32_t* row0 = reinterpret_cast<const uint32_t*>(
          box + ((4 * y + 2 * unit.j) * pitch + skew + 4 * x) * int(sizeof(uint16_t)));
      const uint32_t* row1 = row0 + pitch / 2;
      const uint4 record = make_uint4(row0[0], row0[1], row1[0], row1[1]);
      special |= nonfinite_halves<Mode>(record.x) | nonfinite_halves<Mode>(record.y) |
                 nonfinite_halves<Mode>(record.z) | nonfinite_halves<Mode>(record.w);
      *reinterpret_cast<uint4*>(slot + unit.j * kPlaneBytes + unit.cell * kRecordBytes) = record;
    }
    const bool last = at.channel == kInChannels - 1;
    flags.staged(special != 0, last, ring, warp, lane);
    // The records were written through the generic proxy (wgmma reads them through
    // the async proxy), and the box was read through it before a copy overwrites it.
    fence_async_proxy();
    producer_barrier();  // every producer is done with the box
    issue_next();
    barrier_arrive(&ring.full[pos.slot]);
    if (last) flags.finish<T>(ring, pos, p, plan, at.tile, thread);
    at.advance(plan);
    pos.advance();
    raw_pos.advance();
  }
}

// ---- consumers --------------------------------------------------------------

// One tap of one stage: acc += A (64 records from `a`) x B (the tap's blocks at `b`).
template <class Mode>
__device__ __forceinline__ void multiply_tap(float (&acc)[mma::kNTiles][4], uint32_t a, uint32_t b) {
  const auto operand = [](uint32_t addr) {
    return wgmma::descriptor(addr, kPlaneBytes, 8 * kRecordBytes);
  };
  if constexpr (std::is_same_v<Mode, mma::Bf16x3>) {
    // Small terms first, as in the register engine.
    wgmma::bf16_m64n96k16_ss(acc, operand(a + 2 * kPlaneBytes), wgmma::descriptor(b));
    wgmma::bf16_m64n96k16_ss(acc, operand(a), wgmma::descriptor(b + wgmma::kBlockBytes));
    wgmma::bf16_m64n96k16_ss(acc, operand(a), wgmma::descriptor(b));
  } else if constexpr (std::is_same_v<Mode, mma::Tf32>) {
    wgmma::tf32_m64n96k8_ss(acc, operand(a), wgmma::descriptor(b));
    wgmma::tf32_m64n96k8_ss(acc, operand(a + 2 * kPlaneBytes),
                            wgmma::descriptor(b + wgmma::kBlockBytes));
  } else if constexpr (Mode::kIsBf16) {
    wgmma::bf16_m64n96k16_ss(acc, operand(a), wgmma::descriptor(b));
  } else {
    wgmma::f16_m64n96k16_ss(acc, operand(a), wgmma::descriptor(b));
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

// Consumer warps: per stage, 9 taps of MMAs on the slot's window; a stage's MMAs
// run while the next stage's are issued, and its slot is released once they are
// done. After a tile's last channel, store (the accumulators began at the bias).
// The channel loop is unrolled so that every wgmma wait sits on a path the compiler
// can follow: a wait under a data-dependent branch makes ptxas serialise every
// wgmma of the kernel (C7518).
template <class Mode, DType T>
__device__ void consume(const Problem& p, const Plan& plan, const unsigned char* slots,
                        Ring<Staged<Mode>::kSlots>& ring, const unsigned char* b_all,
                        const float* bias, uint16_t* staged, int warp, int lane) {
  RingPos<Staged<Mode>::kSlots> pos;
  const uint32_t wv_bytes = uint32_t(plan.wv) * kRecordBytes;
  int parity = 0;  // of the tile count
  for (int64_t index = blockIdx.x; index < plan.tiles; index += gridDim.x) {
    const Tile tile = decode_tile(plan, index);
    // Zeros, with the bias added after the MMAs: accumulators set from loaded values
    // before the wait loop make ptxas serialise every wgmma (C7520).
    float acc[kMTiles][mma::kNTiles][4] = {};
    int in_flight = 0;  // the slot of the stage whose MMAs may still run
#pragma unroll
    for (int channel = 0; channel < kInChannels; ++channel) {
      barrier_wait(&ring.full[pos.slot], pos.phase);
      __syncwarp();  // the warpgroup-collective MMAs need the whole warp back together
      // Addresses read from lane 0 are known warp-uniform: the descriptors are then
      // built in uniform registers.
      const uint32_t a = __shfl_sync(
          0xffffffffu,
          smem_address(slots) + pos.slot * Staged<Mode>::kSlotBytes +
              uint32_t(tile.base + (warp >> 2) * 64) * kRecordBytes,
          0);
      const uint32_t b = __shfl_sync(
          0xffffffffu,
          smem_address(b_all) + channel * kTapSteps * Mode::kWgBlocks * wgmma::kBlockBytes, 0);
      wgmma::fence();
#pragma unroll
      for (int dy = 0; dy < kTaps1D; ++dy) {
#pragma unroll
        for (int dx = 0; dx < kTaps1D; ++dx) {
          multiply_tap<Mode>(acc[0], a + dy * wv_bytes + dx * kRecordBytes,
                             b + (dy * kTaps1D + dx) * Mode::kWgBlocks * wgmma::kBlockBytes);
        }
      }
      wgmma::commit();
      if (channel > 0) {
        wgmma::wait<1>();  // the previous stage's MMAs are done with its slot
        barrier_arrive(&ring.empty[in_flight]);
      }
      in_flight = pos.slot;
      pos.advance();
    }
    wgmma::wait<0>();
    wgmma::fence_accumulators(acc[0]);
    barrier_arrive(&ring.empty[in_flight]);
    add_bias(acc, bias, lane & 3);
    // The same in every consumer thread (their group barriers match): the producers
    // store a tile whose input holds Inf or NaN.
    const bool exact = ring.nonfinite[parity] != 0;
    parity ^= 1;
    if (exact) continue;
    if constexpr (SmemLayout<Mode>::kStagedStores) {
      store_tile_staged<T>(acc, staged, p, warp, lane,
                           [&](int local) { return place_pixel(plan, tile, p, local).out; });
    } else {
      store_tile(acc, thread_rows(plan, tile, p, warp, lane >> 2).out, p, lane & 3);
    }
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

template <class Mode, DType T, bool kTma>
__global__ void __launch_bounds__(kTileThreads, 1)
    conv1_s2d_kernel(const __grid_constant__ Problem p, const __grid_constant__ Plan plan,
                     const __grid_constant__ WindowMap map) {
  using Layout = SmemLayout<Mode>;
  using Raw = typename Mode::Raw;
  constexpr int kSlots = Staged<Mode>::kSlots;
  static_assert(std::is_same_v<Raw, typename Storage<T>::type>, "mode matches dtype");
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
  // The window slots are free until the producers start: scratch for raw weights.
  // Its first barrier publishes the ring, k_taps and the bias.
  const bool infinite_weight =
      pack_weights<Mode, true, kTapSteps>(p, k_taps, b_all, reinterpret_cast<Raw*>(slots), tid);
  // B was written through the generic proxy; the tensor cores read it through the async proxy.
  fence_async_proxy();
  // Infinite weights make inputs split toward zero (see mma::Round). Ends in a CTA barrier.
  const Round round = __syncthreads_or(infinite_weight) ? Round::kTowardZero : Round::kNearest;
  if (warp < kConsumerWarps) {
    consume<Mode, T>(p, plan, slots, ring, smem, bias,
                     reinterpret_cast<uint16_t*>(smem + Layout::kStagedAt), warp, lane);
  } else if constexpr (kTma) {
    static_assert(Staged<Mode>::kRawSlots == 2, "TMA staging has its raw slots");
    produce_tma<Mode, T>(p, plan, &map, slots, smem + Layout::kRawAt, ring, warp - kConsumerWarps,
                         lane);
  } else {
    produce<Mode, T>(p, plan, slots, ring, round, warp - kConsumerWarps, lane);
  }
}

template <class Mode>
constexpr size_t smem_bytes() {
  return SmemLayout<Mode>::kTotal;
}

template <class Mode, DType T, bool kTma>
cudaError_t launch_kernel(const Problem& p, const Plan& plan, const WindowMap& map,
                          const DeviceInfo& device, cudaStream_t stream) {
  constexpr auto kernel = conv1_s2d_kernel<Mode, T, kTma>;
  int per_sm = 0;
  const cudaError_t err = resident_ctas_per_sm<kernel>(smem_bytes<Mode>(), kTileThreads, per_sm);
  if (err != cudaSuccess) return err;
  const int64_t grid = std::min<int64_t>(plan.tiles, int64_t(per_sm) * device.sm_count);
  kernel<<<unsigned(grid), kTileThreads, smem_bytes<Mode>(), stream>>>(p, plan, map);
  return cudaSuccess;  // launch errors: C10_CUDA_KERNEL_LAUNCH_CHECK in the caller
}

// TMA staging for 16-bit inputs: rows unit-stride and 16-byte aligned, and a box of
// every window (its rows x the virtual width's columns plus the alignment skew) that
// fits a raw slot. Sets the plan's box and encodes `map`.
bool make_tma_plan(const Problem& p, Plan& plan, WindowMap& map) {
  constexpr int64_t kPerUnit = 8;  // 16-bit elements per 16 bytes
  const bool aligned = p.in_stride[3] == 1 && reinterpret_cast<uintptr_t>(p.input) % 16 == 0 &&
                       p.in_stride[2] % kPerUnit == 0 && p.in_stride[1] % kPerUnit == 0 &&
                       p.in_stride[0] % kPerUnit == 0;
  const int64_t cols = (kPerUnit - 2 + kStride * plan.wv + kPerUnit - 1) / kPerUnit * kPerUnit;
  const int64_t rows = kStride * ((plan.cells + plan.wv - 1) / plan.wv);
  if (!aligned || cols > 256 || rows > 256 || cols * rows * 2 > kRawSlotBytes ||
      !encode_window_map(p, cols, rows, map)) {
    return false;
  }
  plan.box_cols = cols;
  plan.box_rows = rows;
  return true;
}

template <class Mode, DType T>
cudaError_t launch_typed(const Problem& p, const DeviceInfo& device, cudaStream_t stream) {
  Plan plan = make_plan(p.batch, p.out_h, p.out_w);
  if (plan.tiles == 0) return cudaSuccess;
  WindowMap map{};  // read by TMA kernels only
  if constexpr (Staged<Mode>::kRawSlots > 0) {
    if (make_tma_plan(p, plan, map)) return launch_kernel<Mode, T, true>(p, plan, map, device, stream);
  }
  return launch_kernel<Mode, T, false>(p, plan, map, device, stream);
}

size_t smem_bytes_for(const Problem& p) {
  switch (p.dtype) {
    case DType::kFloat32:
      return p.allow_tf32 ? smem_bytes<mma::Tf32>() : smem_bytes<mma::Bf16x3>();
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
  // Its tiles are 192 pixels; small batches keep the register-gather engine, whose
  // plan spreads them over more CTAs.
  const s2d::Plan plan = s2d::plan_on(p, device);
  if (!device.allow_wgmma || plan.strips == 0 ||
      plan.tiles < s2d::kMinTilesPerSm * device.sm_count) {
    return false;
  }
  // Where it wins (H200, batch 256, docs/perf-notes.md v13): its producers load
  // element by element, so it loses to the register-gather engine where that one
  // stages by TMA (224, 256) and, for 16-bit inputs, by cp.async (512); it wins
  // where windows come through cp.async (float32 at 227 and 512) or registers
  // (16-bit at 227).
  const WindowStaging other = igemm_window_staging(p, device);
  return p.dtype == DType::kFloat32 ? other != WindowStaging::kTma
                                    : other == WindowStaging::kRegisters;
}

cudaError_t launch_conv1_s2d(const Problem& p, const DeviceInfo& device, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::kFloat32:
      return p.allow_tf32 ? s2d::launch_typed<mma::Tf32, DType::kFloat32>(p, device, stream)
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
