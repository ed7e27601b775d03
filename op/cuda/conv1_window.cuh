// Staging a tile's input window (one input channel) in shared memory, for the
// implicit GEMM in conv1_igemm.cu: float32 and aligned 16-bit windows by cp.async
// with hardware zero fill, then converted in place into MMA operand words; other
// 16-bit strides through registers. Padding (outside the image) arrives as zeros.
#pragma once

#include <cstdint>

#include "../conv1_geometry.h"
#include "conv1_launch.h"
#include "conv1_mma.cuh"
#include "conv1_tiling.h"

namespace alexconv {
namespace cuda {

// Elements per thread of a full slot on the register path.
constexpr int kLoadsPerThread = kSlotElems / kTileThreads;

// Window staging: the window is cut into 32-column chunks, and (chunk, row)
// pairs are numbered chunk-major; warp w takes pairs w, w + 8, w + 16, ..., one
// element per lane. A warp thus walks down a column chunk 8 rows at a time, so its
// column terms stay fixed and each element costs one pointer add; the walk is
// warp-uniform.
// kLoadsPerThread pairs per warp cover a full slot because the plan keeps
// rows * pitch <= kSlotElems with pitch a multiple of 32.
// Only for non-empty tiles (rows > 0): callers return early on empty ones.
struct WindowWalk {
  int rows, chunks, row, chunk;
  __device__ WindowWalk(const Tile& tile, int warp)
      : rows(int(tile.rows)), chunks(int((tile.cols + 31) / 32)), row(warp % rows),
        chunk(warp / rows) {}
  __device__ bool valid() const { return chunk < chunks; }
  // Returns true when the walk moved to a new chunk.
  __device__ bool next() {
    row += kTileThreads / 32;
    if (row < rows) return false;
    while (row >= rows) {
      row -= rows;
      ++chunk;
    }
    return true;
  }
};

// A 16-bit load that yields 0 where `inside` is false, without a branch or a
// select that would wait on the load (all of a stage's loads must stay in flight
// together). Only the register path -- 16-bit inputs -- loads element-wise.
__device__ __forceinline__ uint16_t load_or_zero(const uint16_t* ptr, bool inside) {
  uint16_t v;
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\nmov.b16 %0, 0;\n"
      "@p ld.global.nc.b16 %0, [%1];\n}\n"
      : "=h"(v)
      : "l"(ptr), "r"(int(inside)));
  return v;
}

template <class Mode>
__device__ void load_window(typename Mode::Raw (&regs)[kLoadsPerThread], const Problem& p,
                            const Tile& tile, int channel, int warp, int lane) {
  using Raw = typename Mode::Raw;
  if (tile.rows == 0) return;  // an empty tile (the last of a narrower strip) stages nothing
  const Raw* base = static_cast<const Raw*>(p.input) + tile.n * p.in_stride[0] +
                    channel * p.in_stride[1];
  // Window origin in input coordinates; every window index fits in int32.
  const int iy0 = int(tile.oy0 * kStride - kPad), ix0 = int(tile.x0 * kStride - kPad);
  const int cols = int(tile.cols);
  const unsigned height = unsigned(p.in_h), width = unsigned(p.in_w);
  const int64_t row_step = int64_t(kTileThreads / 32) * p.in_stride[2];
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
  WindowWalk w(tile, warp);
  int index = w.row * pitch + w.chunk * 32 + lane;
#pragma unroll
  for (int i = 0; i < kLoadsPerThread; ++i) {
    if (w.valid()) slot[index] = Mode::to_word(regs[i], round);
    index += (kTileThreads / 32) * pitch;
    if (w.next()) index = w.row * pitch + w.chunk * 32 + lane;
  }
}

// Window data travels by cp.async straight into shared memory: no staging
// registers, and the copy engine zero-fills the padding (src-size < 4).
__device__ __forceinline__ void copy_async_4(uint32_t smem_addr, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr), "l"(src),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void copy_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}
__device__ __forceinline__ void copy_async_wait_all() { copy_async_wait<0>(); }

// This thread's share of a window of `units` per row: (row, 32-unit chunk)
// pairs are numbered chunk-major and warp w takes pairs w, w + 8, ... So a warp
// walks down one chunk 8 rows at a time, one unit per lane.
struct WindowShare {
  static constexpr int kWarps = kTileThreads / 32;
  int chunks;
  __device__ WindowShare(int units) : chunks((units + 31) / 32) {}
  __device__ static int first_row(int warp, int chunk, int rows) {
    return ((warp - chunk * rows) % kWarps + kWarps) % kWarps;
  }
};

// cp.async path: one 4-byte copy per unit -- one float32 element, or an aligned
// pair of 16-bit elements (the host checks W is unit-stride and 4-byte aligned).
// The copy engine zero-fills what lies outside the input, including the second
// half of a pair at an odd right edge. Per row the source and destination only
// advance by fixed strides.
template <class Mode>
__device__ void issue_window_async(typename Mode::Word* slot, const Problem& p, const Tile& tile,
                                   int channel, int pitch, int warp, int lane) {
  using Raw = typename Mode::Raw;
  constexpr int kPerUnit = 4 / int(sizeof(Raw));
  const Raw* base = static_cast<const Raw*>(p.input) + tile.n * p.in_stride[0] +
                    channel * p.in_stride[1];
  const int iy0 = int(tile.oy0 * kStride - kPad), ix0 = int(tile.x0 * kStride - kPad);
  const int rows = int(tile.rows), cols = int(tile.cols);
  const unsigned height = unsigned(p.in_h);
  const int width = int(p.in_w);
  const uint32_t slot_addr = static_cast<uint32_t>(__cvta_generic_to_shared(slot));
  const WindowShare share((cols + kPerUnit - 1) / kPerUnit);
  const int64_t src_step = int64_t(WindowShare::kWarps) * p.in_stride[2];
  const uint32_t dst_step = uint32_t(WindowShare::kWarps * pitch) * uint32_t(sizeof(Raw));
  for (int chunk = 0; chunk < share.chunks; ++chunk) {
    const int col = (chunk * 32 + lane) * kPerUnit, ix = ix0 + col;
    // Past the window's last column: copy nothing. (A pair lane there would land
    // beyond the row pitch, in another warp's row.)
    if (col >= cols) break;
    // Bytes of this column (pair) inside the input; ix0 is even, so a pair never starts at -1.
    const int col_bytes = !(ix >= 0 && ix < width) ? 0
                          : (kPerUnit == 2 && ix + 1 >= width) ? int(sizeof(Raw))
                                                                 : 4;
    const int first = WindowShare::first_row(warp, chunk, rows);
    const Raw* src = base + int64_t(iy0 + first) * p.in_stride[2] + int64_t(ix) * p.in_stride[3];
    uint32_t dst = slot_addr + uint32_t(first * pitch + col) * uint32_t(sizeof(Raw));
    for (int row = first; row < rows; row += WindowShare::kWarps) {
      const int bytes = unsigned(iy0 + row) < height ? col_bytes : 0;
      // Units that copy nothing still need a valid address.
      copy_async_4(dst, bytes ? src : base, bytes);
      src += src_step;
      dst += dst_step;
    }
  }
}

// After its own copies land, each thread turns its float32 elements into MMA
// words in place (16-bit elements are already in operand format).
template <class Mode>
__device__ void convert_window(typename Mode::Word* slot, const Tile& tile, int pitch, int warp,
                               int lane, mma::Round round) {
  if constexpr (sizeof(typename Mode::Raw) == 4) {
    const int rows = int(tile.rows);
    const WindowShare share(int(tile.cols));
    for (int chunk = 0; chunk < share.chunks; ++chunk) {
      typename Mode::Word* word = slot + chunk * 32 + lane;
      for (int row = WindowShare::first_row(warp, chunk, rows); row < rows;
           row += WindowShare::kWarps) {
        word[row * pitch] = Mode::to_word(__uint_as_float(word[row * pitch]), round);
      }
    }
  }
}

}  // namespace cuda
}  // namespace alexconv
