// The space-to-depth kernel's shared vocabulary (s2d.cu): what a window slot
// holds, the ring of barriers between producer and consumer warps, the producers'
// votes on tiles to store exactly, and where a tile pixel lands in the output. Included
// by the kernel's parts alone.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "../../conv1_geometry.h"
#include "../common/epilogue.cuh"  // kMTiles
#include "../common/operand_modes.cuh"
#include "../common/ring.cuh"
#include "../common/tile_order.h"  // Divider, strip_columns, kMaxIndex
#include "../common/tile_votes.cuh"
#include "../common/warp_roles.h"
#include "../common/weight_scale.cuh"
#include "../kernel_api.h"
#include "plan.h"

namespace alexconv {
namespace cuda {
namespace s2d {

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

// Load unit u of a window (row pair j = u / cells, cell u % cells): its first input
// row and column from the window's first row's first cell (4y + 2j, 4x, where the window's
// cell u % cells lies skip cells into that row: Tile::skip), and its (first) record's byte
// offset in a slot (row pair j starts at plane j).
struct Unit {
  int row, col, record;
};
// The record's offset alone: no division. kRecords: the slot's plane size (the Hopper kernel's
// kPlaneRecords; the portable kernel's fits choose theirs).
template <int kRecords = kPlaneRecords>
__device__ __forceinline__ int record_at(const Plan& plan, int u) {
  const int cells = int(plan.cells);
  // j * plane bytes + cell * kRecordBytes, folded.
  const int pair_shift = kRecords * kRecordBytes - cells * kRecordBytes;
  return u * kRecordBytes + (u >= cells ? pair_shift : 0);
}
template <int kRecords = kPlaneRecords>
__device__ __forceinline__ Unit unit_at(const Plan& plan, int u, int skip) {
  const int cells = int(plan.cells), j = u >= cells, cell = u - j * cells + skip;
  const int y = plan.by_wv.small(cell), x = cell - y * int(plan.wv);
  return {int(kStride) * y + 2 * j, int(kStride) * x, record_at<kRecords>(plan, u)};
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

// A slot's bytes with planes of kRecords records (the portable kernel's fits choose theirs).
template <class Mode, int kRecords>
constexpr int kSlotBytesOf = Staged<Mode>::kPlanes * kRecords * kRecordBytes;

// The window slots' pipeline (full: every producer thread arrived, the window is staged;
// empty: every consumer thread did, the slot is free), then what the copy engine and the
// range guard add. votes[tile parity]: what producer warp w staged into the tile's windows
// (TileVotes), in byte w; written before the producers commit the tile's last stage.
template <int kSlots>
struct Ring : Pipeline<kSlots> {
  uint64_t landed[2];  // copy-engine staging: raw slot r's copy has arrived
  uint32_t votes[2];   // byte w: producer warp w's TileVotes over a tile's windows
  uint32_t infinite_weights;  // the prologue's finding (see conv1_s2d_kernel)

  // The copy into raw slot `raw.slot` has landed (a ring of one or two raw slots).
  template <int kRawSlots>
  __device__ __forceinline__ void wait_landed(const RingPos<kRawSlots>& raw) {
    barrier_wait(&landed[raw.slot], raw.phase);
  }
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

// The output offsets of the thread's accumulator rows g and g + 8 of each of its warp's kMT
// m-tiles (warp w owns tile pixels 16 kMT w on; -1: none).
template <int kMT = 1>
struct Rows {
  int64_t out[kMT][2];
};
template <int kMT = 1>
__device__ inline Rows<kMT> thread_rows(const Plan& plan, const Tile& tile, const Problem& p, int warp, int g) {
  Rows<kMT> r;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) r.out[mt][h] = place_pixel(plan, tile, p, (warp * kMT + mt) * 16 + h * 8 + g).out;
  }
  return r;
}

// The K order of a (channel, tap) step as common/weight_packing.cuh's table: k = 4 ry + rx
// multiplies tap (4 dy + ry, 4 dx + rx), a zero weight past the kernel.
__device__ __forceinline__ uint8_t step_tap(int step, int k) {
  const int ky = (step / kTaps1D) * kStride + k / kStride;
  const int kx = (step % kTaps1D) * kStride + k % kStride;
  return uint8_t(ky < kKernel && kx < kKernel ? ky * kKernel + kx : mma::kTapsPerChannel);
}

}  // namespace s2d
}  // namespace cuda
}  // namespace alexconv
