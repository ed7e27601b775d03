// Staging a tile's input window (one input channel) in shared memory, for the
// register-gather implicit GEMM (igemm.cu): float32 and aligned 16-bit windows by cp.async
// or (Hopper) one TMA copy, with hardware zero fill, then converted in place into
// MMA operand words; other 16-bit strides through registers. Padding (outside the
// image) arrives as zeros.
// The producer warps do all of it: `warp` below is a producer warp's index among them.
#pragma once

#include <cstdint>

#include "../../conv1_geometry.h"
#include "../arch/global_loads.cuh"
#include "../arch/mbarrier.cuh"
#include "../arch/smem.cuh"
#include "../arch/tma.cuh"
#include "../common/launch_terms.h"
#include "../common/operand_modes.cuh"
#include "../common/ring.cuh"
#include "../kernel_api.h"
#include "tile_plan.h"

namespace alexconv {
namespace cuda {
namespace igemm {

// How windows reach shared memory (cuda::Staging, common/launch_terms.h): element loads
// through registers (kLoads: 16-bit inputs whose rows are not unit-stride, 4-byte-aligned
// runs), 4-byte cp.async units (kCopy4: one float32 element, any stride; or an aligned 16-bit
// pair), 16-byte cp.async units (kCopy16: unit-stride, 16-byte-aligned rows: the common
// contiguous case), or, for such rows on Hopper where the window fits a TMA box, one tensor
// copy per window (kTma), issued by one thread (no per-element copy instructions at all).
// kLoads16: float32 windows staged as 16-bit words (mma::Float32AsHalf) from unit-stride,
// 16-byte-aligned rows: 16-byte loads through registers, converted on the way to the slot.

// Elements per producer thread of a full slot on the register path.
constexpr int kLoadsPerThread = kSlotElems / kProducerThreads;
static_assert(kSlotElems % kProducerThreads == 0, "producers share a slot evenly");

// Window staging: the window is cut into 32-column chunks, and (chunk, row)
// pairs are numbered chunk-major; producer warp w takes pairs w, w + 4, ..., one
// element per lane. A warp thus walks down a column chunk 4 rows at a time, so its
// column terms stay fixed and each element costs one pointer add; the walk is
// warp-uniform.
// kLoadsPerThread pairs per warp cover a full slot because the plan keeps
// rows * pitch <= kSlotElems with pitch a multiple of 32 (make_tile_plan; TMA
// plans have other pitches but never take this path).
// Only for non-empty tiles (rows > 0): callers return early on empty ones.
struct WindowWalk {
  int rows, chunks, row, chunk;
  __device__ WindowWalk(const Tile& tile, int warp)
      : rows(int(tile.rows)), chunks(int((tile.cols + 31) / 32)), row(warp % rows),
        chunk(warp / rows) {}
  __device__ bool valid() const { return chunk < chunks; }
  // Returns true when the walk moved to a new chunk.
  __device__ bool next() {
    row += kProducerWarps;
    if (row < rows) return false;
    while (row >= rows) {
      row -= rows;
      ++chunk;
    }
    return true;
  }
};

// Only the register path -- 16-bit inputs -- loads element-wise (load_or_zero,
// arch/global_loads.cuh).

template <class Mode>
__device__ void load_window(typename Mode::Raw (&regs)[kLoadsPerThread], const Problem& p,
                            const Tile& tile, int channel, int warp, int lane) {
  using Raw = typename Mode::Raw;
  if (tile.rows == 0) return;  // an empty tile (the last of a narrower strip) stages nothing
  const Raw* base = static_cast<const Raw*>(p.input) + tile.n * p.in_stride[0] +
                    channel * p.in_stride[1];
  // Window origin in input coordinates; every window index fits in int32.
  const int iy0 = int(tile.iy0()), ix0 = int(tile.ix0());
  const int cols = int(tile.cols);
  const unsigned height = unsigned(p.in_h), width = unsigned(p.in_w);
  const int64_t row_step = int64_t(kProducerWarps) * p.in_stride[2];
  WindowWalk w(tile, warp);
  // Negative coordinates wrap to huge unsigned values: one compare per bound.
  const auto column = [&](int& ix, bool& col_ok, const Raw*& col_base) {
    const int col = w.chunk * 32 + lane;
    ix = ix0 + col;
    col_ok = col < cols && unsigned(ix) < width;
    col_base = base + int64_t(ix) * p.in_stride[3];
  };
  int ix;
  bool col_ok;
  const Raw* col_base;
  column(ix, col_ok, col_base);
  int64_t row_off = int64_t(iy0 + w.row) * p.in_stride[2];
#pragma unroll
  for (int i = 0; i < kLoadsPerThread; ++i) {
    if (w.valid()) {
      regs[i] = load_or_zero(col_base + row_off, col_ok && unsigned(iy0 + w.row) < height);
    }
    row_off += row_step;
    if (w.next()) {
      column(ix, col_ok, col_base);
      row_off = int64_t(iy0 + w.row) * p.in_stride[2];
    }
  }
}

template <class Mode>
__device__ void store_window(typename Mode::Word* slot,
                             const typename Mode::Raw (&regs)[kLoadsPerThread],
                             const Tile& tile, int pitch, int warp, int lane, mma::Round round) {
  if (tile.rows == 0) return;
  const int skew = window_skew(tile, sizeof(typename Mode::Raw)), cols = int(tile.cols);
  WindowWalk w(tile, warp);
  int index = w.row * pitch + skew + w.chunk * 32 + lane;
#pragma unroll
  for (int i = 0; i < kLoadsPerThread; ++i) {
    // Lanes past the window's width store nothing: with the skew they would reach
    // into the next row.
    if (w.valid() && w.chunk * 32 + lane < cols) slot[index] = Mode::to_word(regs[i], round);
    index += kProducerWarps * pitch;
    if (w.next()) index = w.row * pitch + skew + w.chunk * 32 + lane;
  }
}

// kLoads16: a window's 16-byte units (4 float32 elements, aligned to 4 input columns as
// issue_window_async's are) numbered row-major over its unit grid, unit u taken by producer
// thread u % 128: at most kUnitsPerThread each (rows * pitch <= kSlotElems, pitch >= the grid's
// width), all loaded before the first is stored. The element-wise path above costs ~40
// instructions per element in its walk, twice fp16 Halves's, and was slower (docs/perf-notes.md,
// "Portable kernels (sm_80 and up)"); a unit costs a few per 4 elements.
constexpr int kUnitsPerThread = (kSlotElems / 4 + kProducerThreads - 1) / kProducerThreads;

struct WindowUnits {
  int first, per_row;  // the grid: units first .. first + per_row - 1 of every window row
  int row_step, col_step;  // kProducerThreads units further on
  __device__ WindowUnits(const Tile& tile, int skew)
      : first(skew / 4), per_row((skew + int(tile.cols) + 3) / 4 - skew / 4),
        row_step(kProducerThreads / per_row), col_step(kProducerThreads % per_row) {}
  // f(i, row, unit) for each of this thread's units (unit: its first element's slot column / 4).
  template <class F>
  __device__ __forceinline__ void for_each(const Tile& tile, int thread, F&& f) const {
    int row = thread / per_row, col = thread - row * per_row;
#pragma unroll
    for (int i = 0; i < kUnitsPerThread; ++i) {
      if (row < int(tile.rows)) f(i, row, first + col);
      row += row_step;
      col += col_step;
      if (col >= per_row) {
        col -= per_row;
        ++row;
      }
    }
  }
};

__device__ __forceinline__ void load_window_units(float4 (&units)[kUnitsPerThread], const Problem& p, const Tile& tile,
                                  int channel, int thread) {
  // Every unit written, those past the window too: a unit left as the last stage had it stayed
  // live across stages and spilled (sm_90a: 140 bytes, each load then waited for by its spill).
#pragma unroll
  for (int i = 0; i < kUnitsPerThread; ++i) units[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  if (tile.rows == 0) return;
  const float* base = static_cast<const float*>(p.input) + tile.n * p.in_stride[0] + channel * p.in_stride[1];
  const int skew = window_skew(tile, 4);
  const int iy0 = int(tile.iy0()), ix_base = int(tile.ix0()) - skew;
  const unsigned height = unsigned(p.in_h);
  const int width = int(p.in_w);
  WindowUnits(tile, skew).for_each(tile, thread, [&](int i, int row, int unit) {
    const int iy = iy0 + row, ix = ix_base + 4 * unit;  // ix: a multiple of 4, so ix >= 0 is the whole unit
    const bool row_in = unsigned(iy) < height;
    // Whole units: the host takes this path only for widths that are a multiple of 4.
    units[i] = load_or_zero4(base + int64_t(iy) * p.in_stride[2] + ix, row_in && unsigned(ix) < unsigned(width));
  });
}

// Stores the units as 16-bit words (Mode::to_word) and returns the largest magnitude among the
// window's own elements (NaN ignored), for the range vote.
template <class Mode>
__device__ __forceinline__ float store_window_units(typename Mode::Word* slot, const float4 (&units)[kUnitsPerThread],
                                    const Tile& tile, int pitch, int thread) {
  static_assert(sizeof(typename Mode::Word) == 2 && sizeof(typename Mode::Raw) == 4,
                "float32 staged as float16 words (rounded to nearest, as Float32AsHalf::to_word)");
  float top = 0.f;
  if (tile.rows == 0) return top;
  const int skew = window_skew(tile, 4), end = skew + int(tile.cols);
  WindowUnits(tile, skew).for_each(tile, thread, [&](int i, int row, int unit) {
    const float4 v = units[i];
    const int c = 4 * unit;  // slot column of v.x
    *reinterpret_cast<uint2*>(slot + row * pitch + c) =
        make_uint2(mma::pack_half2(v.x, v.y), mma::pack_half2(v.z, v.w));
    const float e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (c + k >= skew && c + k < end) top = fmaxf(top, fabsf(e[k]));
    }
  });
  return top;
}

// This thread's share of a window staged in units of kBytes: the row's units
// [first, end) cover slot elements skew .. skew + cols - 1. (row, 32-unit chunk)
// pairs are numbered chunk-major and producer warp w takes pairs w, w + 4, ...: a warp
// walks down one chunk, one unit per lane. f(row0, element, ix) is called once per
// unit column the thread owns, with the column's first slot element in a row and its
// input column ix; the thread's rows there are row0, row0 + kProducerWarps, ... <
// tile.rows.
template <int kPerUnit, class F>
__device__ __forceinline__ void for_each_window_column(const Tile& tile, int skew, int warp,
                                                       int lane, F&& f) {
  constexpr int kWarps = kProducerWarps;
  const int rows = int(tile.rows);
  const int first = skew / kPerUnit, end = (skew + int(tile.cols) + kPerUnit - 1) / kPerUnit;
  const int ix_base = int(tile.ix0()) - skew;  // a multiple of kPerUnit
  const int chunks = (end - first + 31) / 32;
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int unit = first + chunk * 32 + lane;
    if (unit >= end) break;
    f(((warp - chunk * rows) % kWarps + kWarps) % kWarps, unit * kPerUnit,
      ix_base + unit * kPerUnit);
  }
}

// Units of kBytes: one float32 element or an aligned pair of 16-bit elements
// (kBytes 4; any W stride for one element, unit stride for pairs), or 16 bytes of
// a row that is unit-stride and 16-byte aligned (the host checks which applies).
// Units are aligned to their own size in input columns, so a unit never straddles
// the left edge, and at the right edge its valid elements are a prefix.
template <class Mode, int kBytes>
__device__ void issue_window_async(typename Mode::Word* slot, const Problem& p, const Tile& tile,
                                   int channel, int pitch, int warp, int lane) {
  using Raw = typename Mode::Raw;
  constexpr int kPerUnit = kBytes / int(sizeof(Raw));
  const Raw* base = static_cast<const Raw*>(p.input) + tile.n * p.in_stride[0] +
                    channel * p.in_stride[1];
  const int iy0 = int(tile.iy0()), rows = int(tile.rows);
  const unsigned height = unsigned(p.in_h);
  const int width = int(p.in_w);
  const uint32_t slot_addr = smem_address(slot);
  const int64_t row_step = kProducerWarps * p.in_stride[2];
  const uint32_t slot_row_step = uint32_t(kProducerWarps * pitch * sizeof(Raw));
  for_each_window_column<kPerUnit>(
      tile, window_skew(tile, sizeof(Raw)), warp, lane, [&](int row0, int element, int ix) {
        const int valid = ix < 0 ? 0 : min(kPerUnit, width - ix);
        const int col_bytes = valid > 0 ? valid * int(sizeof(Raw)) : 0;
        const Raw* src = base + int64_t(iy0 + row0) * p.in_stride[2] + int64_t(ix) * p.in_stride[3];
        uint32_t dst = slot_addr + uint32_t(row0 * pitch + element) * uint32_t(sizeof(Raw));
        for (int row = row0; row < rows; row += kProducerWarps) {
          const int bytes = unsigned(iy0 + row) < height ? col_bytes : 0;
          // Units that copy nothing still need a valid address.
          copy_async<kBytes>(dst, bytes ? src : base, bytes);
          src += row_step;
          dst += slot_row_step;
        }
      });
}

// The whole window as one TMA box of the plan's largest window (rows beyond this
// tile's land unused); the copy engine zero-fills what lies outside the input.
// Like a cp.async unit, the box starts 16-byte aligned in global memory (a box at
// the window's own first column faulted with "illegal instruction" on the H200),
// so the window sits `window_skew` elements into its rows.
// One producer thread calls this per stage; `landed` completes with the bytes.
template <class Word>
__device__ void issue_window_tma(Word* slot, const void* map, const TilePlan& plan,
                                 const Tile& tile, int channel, uint64_t* landed) {
  if (tile.rows == 0) {  // an empty tile (the last of a narrower strip): nothing to copy
    barrier_arrive(landed);
    return;
  }
  barrier_arrive_expect_bytes(landed, uint32_t(plan.box_rows * plan.pitch * sizeof(Word)));
  tma_load_box(smem_address(slot), map,
               int(tile.ix0()) - window_skew(tile, sizeof(Word)),
               int(tile.iy0()), channel, int(tile.n), landed);
}

// convert_window with the rounding fixed at compile time: the window's rows as
// one flat array of `units` 16-byte units, unit i + 128k by producer thread i.
// Every load of a stage is in flight before the first conversion, and there is no
// row or column arithmetic. (Each thread walking its own copy units in batches
// of 4 took ~4 dependent shared-memory round trips per stage, and under the
// consumers' load the consumers waited on the producers' conversions: docs/perf-notes.md,
// "Versions", producers convert windows as one flat array.)
template <class Mode, mma::Round kRound, int kThreads>
__device__ void convert_window_as(typename Mode::Word* slot, int units, int thread) {
  constexpr int kMaxUnits = (kSlotElems / 4 + kThreads - 1) / kThreads;
  uint4* window = reinterpret_cast<uint4*>(slot);
  uint4 v[kMaxUnits];
#pragma unroll
  for (int i = 0; i < kMaxUnits; ++i) {
    if (thread + i * kThreads < units) v[i] = window[thread + i * kThreads];
  }
#pragma unroll
  for (int i = 0; i < kMaxUnits; ++i) {
    if (thread + i * kThreads < units) window[thread + i * kThreads] = Mode::to_words4(v[i], kRound);
  }
}

// Once the whole window has landed in the slot (every producer's copies), the
// producers turn its float32 elements into MMA words in place (16-bit elements are
// already in operand format). Whole rows are converted, pitch padding included
// (pitches are whole 16-byte units): the gather never reads what lies outside the
// window. kThreads: how many producer threads convert (the first ones).
template <class Mode, int kThreads = kProducerThreads>
__device__ void convert_window(typename Mode::Word* slot, const Tile& tile, int pitch, int warp,
                               int lane, mma::Round round) {
  if constexpr (sizeof(typename Mode::Raw) == 4) {
    if (tile.rows == 0) return;  // an empty tile: nothing was copied
    const int units = int(tile.rows) * pitch / 4, thread = warp * 32 + lane;
    if (round == mma::Round::kNearest) {
      convert_window_as<Mode, mma::Round::kNearest, kThreads>(slot, units, thread);
    } else {
      convert_window_as<Mode, mma::Round::kTowardZero, kThreads>(slot, units, thread);
    }
  }
}

}  // namespace igemm
}  // namespace cuda
}  // namespace alexconv
