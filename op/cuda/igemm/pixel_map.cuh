// Which tile pixel each consumer thread's accumulator rows hold, where that pixel
// lands in the output, and where its window starts in a slot.
#pragma once

#include <cstdint>

#include "../common/epilogue.cuh"
#include "../kernel_api.h"
#include "tile_plan.h"

namespace alexconv {
namespace cuda {
namespace igemm {

// Per-thread view of the tile being multiplied: for its m-tile(s) x 2 rows
// (pixels g and g+8), the offset into the window and into the output (-1: no pixel).
struct PixelRows {
  int window[kMTiles][2];
  int64_t out[kMTiles][2];
};

// Which tile pixel a thread's accumulator row (m-tile mt, half h, group g) is.
// mma.sync: each warp owns 16 consecutive pixels per m-tile. wgmma: each warpgroup
// owns 64 pixels per m-tile, warp w of the group holding rows 16w..16w+15.
template <bool kWgmma>
__device__ __forceinline__ int local_pixel(int warp, int mt, int h, int g) {
  if constexpr (kWgmma) return ((warp >> 2) * kMTiles + mt) * 64 + (warp & 3) * 16 + h * 8 + g;
  return (warp * kMTiles + mt) * 16 + h * 8 + g;
}

// Where strip-local pixel q of a tile lands in the output, and its row in the
// tile's window (in output rows from the tile's first).
struct PixelPlace {
  int64_t out;
  int oy_in_tile, x;
};
__device__ __forceinline__ PixelPlace place_pixel(const Tile& tile, const Problem& p, int q) {
  const int oy = tile.by_width.small(q), x = q - oy * int(tile.width);  // q <= kMaxIndex
  return {tile.n * p.out_stride[0] + oy * p.out_stride[2] + (tile.x0 + x) * p.out_stride[3],
          oy - int(tile.oy0), x};
}

template <bool kWgmma, int kElemBytes>
__device__ PixelRows pixel_rows(const Tile& tile, const TilePlan& plan, const Problem& p,
                                int warp, int g) {
  const int skew = window_skew(tile, kElemBytes);  // the window's column 0 in a slot row
  PixelRows r;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int local = local_pixel<kWgmma>(warp, mt, h, g);
      const int q = int(tile.q_begin) + local;
      r.window[mt][h] = 0;
      r.out[mt][h] = -1;
      if (local < plan.tile_pixels && q < tile.q_end) {
        const PixelPlace place = place_pixel(tile, p, q);
        r.window[mt][h] = int(place.oy_in_tile * kStride * plan.pitch + skew + place.x * kStride);
        r.out[mt][h] = place.out;
      }
    }
  }
  return r;
}

}  // namespace igemm
}  // namespace cuda
}  // namespace alexconv
