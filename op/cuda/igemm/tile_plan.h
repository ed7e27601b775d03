// How the implicit GEMM cuts the output into CTA tiles, shared by the host
// planner and the kernel.
//
// Each image's output is split into `strips` vertical strips of near-equal width.
// Inside a strip, pixels are numbered row-major (q = oy * width + x); a tile is
// `tile_pixels` consecutive numbers of one strip. A tile's input window -- every
// input row its pixels touch, across the strip's columns -- is staged in one
// shared-memory slot per input channel, so the plan keeps it under kSlotElems.
// For 224x224 inputs this is one strip of 55 columns and 192-pixel tiles.
//
// Tiles are numbered image by image, and within an image row band by row band with
// the strips side by side (tile j of every strip, then tile j + 1), so that tiles
// reading and writing the same rows run at about the same time (faster than the strips
// one after another, for this kernel and the space-to-depth one, which numbers its tiles
// the same way). Multi-strip plans with long runs per CTA also take contiguous runs of
// numbers (CtaOrder). Measurements: docs/perf-notes.md, "The measurements behind the
// code's choices".
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../conv1_geometry.h"  // also ALEXCONV_HOST_DEVICE, window_extent
#include "../common/tile_order.h"
#include "../common/warp_roles.h"

namespace alexconv {
namespace cuda {
namespace igemm {

// Window slots in the ring, each holding one input channel's window: 27 rows of
// 256 (a 192-pixel tile at 224x224). Three such fp32 slots and the fp32 weights
// just fit a CTA's 227 KB of shared memory.
constexpr int kStages = 3;
constexpr int kSlotElems = 6912;

struct TilePlan {
  int64_t out_h = 0, out_w = 0;
  int64_t strips = 0;  // 0: not plannable (kMaxIndex)
  int64_t tiles_per_strip = 0, tile_pixels = 0;
  int64_t pitch = 0;  // row pitch of a window in shared memory, in elements
  int64_t box_rows = 0;  // TMA staging: rows of every window copy (the largest window's)
  int64_t tiles = 0;  // batch * strips * tiles_per_strip
  // Dividers by strips * tiles_per_strip, strips, and the two strip widths.
  Divider by_per_image, by_strips, by_narrow, by_wide;
  CtaOrder order;  // the identity unless the launch sets one for its grid
  int64_t pad = kPad;  // the call's padding (Problem::pad), which places each tile's window
};

struct Tile {
  int64_t n = 0;                    // image
  int64_t x0 = 0, width = 0;        // the strip's output columns
  int64_t q_begin = 0, q_end = 0;   // strip-local pixel numbers [q_begin, q_end)
  int64_t oy0 = 0;                  // first output row
  int64_t rows = 0, cols = 0;       // input window; rows == 0 for an empty tile
  int64_t pad = 0;                  // the call's padding
  Divider by_width;
  // The input row and column of the window's (0, 0): output row oy0's and column x0's first tap.
  ALEXCONV_HOST_DEVICE int64_t iy0() const { return oy0 * kStride - pad; }
  ALEXCONV_HOST_DEVICE int64_t ix0() const { return x0 * kStride - pad; }
};

// Windows travel in copy units of up to 16 bytes that start 16-byte aligned in
// global memory. So a slot row holds input column ix0 + c at element `skew + c`,
// where ix0 - skew is a multiple of a 16-byte unit, and the row's last unit may run
// past the window: the pitch keeps kWindowPad elements (skew < 8, overhang < 8)
// beyond the widest window. (TMA plans copy whole boxes instead: their pitch is the
// box width, the widest window plus its skew in whole units; see make_tma_plan.)
constexpr int kCopyBytes = 16;
constexpr int kWindowPad = 16;

ALEXCONV_HOST_DEVICE inline int window_skew(const Tile& t, int elem_bytes) {
  const int per_unit = kCopyBytes / elem_bytes;
  const int64_t ix0 = t.ix0();
  return int(((ix0 % per_unit) + per_unit) % per_unit);
}

// The tile a CTA works on at `index` (its turn; see CtaOrder), in 32-bit arithmetic:
// make_tile_plan keeps tile numbers, strip pixel numbers and the strip products
// below kMaxIndex.
ALEXCONV_HOST_DEVICE inline Tile decode_tile(const TilePlan& plan, int64_t index) {
  Tile t;
  // The identity order (no runs) skips ordered_tile's arithmetic, measurably (perf-notes,
  // "The measurements behind the code's choices").
  const int number = plan.order.per_cta > 0 ? ordered_tile(plan.order, int(index)) : int(index);
  const int n = plan.by_per_image.small(number);
  const int in_image = number - n * int(plan.by_per_image.divisor);
  const int in_strip = plan.by_strips.small(in_image);
  const int strip = in_image - in_strip * int(plan.strips);
  const StripColumns columns = strip_columns(plan.by_strips, strip, int(plan.out_w));
  const int width = columns.width;
  t.n = n;
  t.x0 = columns.x0;
  t.width = width;
  t.pad = plan.pad;
  // Strips are out_w / strips columns wide, or one more.
  t.by_width = width == plan.by_narrow.divisor ? plan.by_narrow : plan.by_wide;
  const int strip_pixels = int(plan.out_h) * width;
  const int q_begin = in_strip * int(plan.tile_pixels);
  const int q_end = q_begin + int(plan.tile_pixels) < strip_pixels ? q_begin + int(plan.tile_pixels)
                                                                    : strip_pixels;
  t.q_begin = q_begin;
  t.q_end = q_end;
  if (q_begin >= q_end) {
    t.q_end = q_begin;
    return t;
  }
  const int oy0 = t.by_width.small(q_begin);
  t.oy0 = oy0;
  t.rows = window_extent(t.by_width.small(q_end - 1) - oy0 + 1);
  t.cols = window_extent(width);
  return t;
}

// Largest window (in rows) a run of `pixels` consecutive pixels of a strip of
// `width` columns can need.
inline int64_t max_window_rows(int64_t pixels, int64_t width, int64_t out_h) {
  int64_t spanned = (pixels - 1 + width - 1) / width + 1;
  if (spanned > out_h) spanned = out_h;
  return window_extent(spanned);
}

// Fewest strips that allow full tiles; failing that, the largest tile any strip
// count allows (narrow images: a tile of many short rows needs a tall window).
// Then, with `slots` CTAs resident at once (a persistent grid), the tile size
// is picked from 192, 128 and 64 pixels (whole wgmma row tiles) to minimise
// waves x (pixels + a per-tile overhead of ~64 pixels' worth): small batches get
// small tiles that reach every multiprocessor, large ones keep full tiles. pad: the call's
// padding (Problem::pad), which places each tile's window.
inline TilePlan make_tile_plan(int64_t batch, int64_t out_h, int64_t out_w, int64_t slots = 1, int64_t pad = kPad) {
  TilePlan best;
  best.pad = pad;
  if (out_h <= 0 || out_w <= 0) return best;
  best.out_h = out_h;
  best.out_w = out_w;
  for (int64_t strips = 1; strips <= out_w; ++strips) {
    const int64_t widest = (out_w + strips - 1) / strips, narrowest = out_w / strips;
    // Rows are staged in 32-unit chunks, one per warp-wide copy: pitches are 32-aligned.
    const int64_t pitch = (window_extent(widest) + kWindowPad + 31) / 32 * 32;
    if (kKernel * pitch > kSlotElems) continue;
    int64_t pixels = kTilePixels;
    while (pixels > 1 && max_window_rows(pixels, narrowest, out_h) * pitch > kSlotElems) --pixels;
    if (pixels > best.tile_pixels) {
      best.strips = strips;
      best.tile_pixels = pixels;
      best.pitch = pitch;
      best.tiles_per_strip = (out_h * widest + pixels - 1) / pixels;
    }
    if (pixels == kTilePixels) break;
  }
  const int64_t widest = (out_w + best.strips - 1) / best.strips;
  const auto tiles_for = [&](int64_t pixels) {
    return batch * best.strips * ((out_h * widest + pixels - 1) / pixels);
  };
  const auto cost = [&](int64_t pixels) {
    return (tiles_for(pixels) + slots - 1) / slots * (pixels + 64);
  };
  int64_t chosen = best.tile_pixels;
  for (int64_t pixels = chosen / 64 * 64; pixels >= 64; pixels -= 64) {
    if (cost(pixels) < cost(chosen)) chosen = pixels;
  }
  best.tile_pixels = chosen;
  best.tiles_per_strip = (out_h * widest + best.tile_pixels - 1) / best.tile_pixels;
  best.tiles = batch * best.strips * best.tiles_per_strip;
  // decode_tile and place_pixel work in 32 bits (see kMaxIndex): tile numbers, strips x
  // out_w (strip_columns), and a tile's pixel numbers, kTilePixels from its first
  // whatever the tile size, which stay below tiles_per_strip * tile_pixels + kTilePixels.
  if (best.tiles_per_strip > (kMaxIndex - kTilePixels) / best.tile_pixels ||
      best.tiles > kMaxIndex || best.strips * out_w > kMaxIndex) {
    return TilePlan{};
  }
  // An empty output (no tiles) never divides: 1 keeps the dividers well defined.
  const auto divider = [](int64_t d) { return Divider(std::max<int64_t>(d, 1)); };
  const int64_t narrow = best.strips > 0 ? out_w / best.strips : 0;
  best.by_per_image = divider(best.strips * best.tiles_per_strip);
  best.by_strips = divider(best.strips);
  best.by_narrow = divider(narrow);
  best.by_wide = divider(narrow + 1);
  return best;
}

// TMA staging (Hopper) copies every window of a plan as one box: as wide as the
// widest window plus its skew, in whole 16-byte units (it is also the slot pitch),
// and as tall as the tallest window. {0, 0} where no box fits: TMA boxes are at
// most 256 x 256, and a box must fit a slot.
struct WindowBox {
  int64_t cols = 0, rows = 0;
};
inline WindowBox window_box(const TilePlan& plan, int elem_bytes) {
  const int64_t per_unit = kCopyBytes / elem_bytes;
  const int64_t widest = (plan.out_w + plan.strips - 1) / plan.strips;
  WindowBox box;
  box.cols = (window_extent(widest) + 2 * (per_unit - 1)) / per_unit * per_unit;
  box.rows = max_window_rows(plan.tile_pixels, plan.out_w / plan.strips, plan.out_h);
  if (box.cols > 256 || box.rows > 256 || box.cols * box.rows > kSlotElems) return {};
  return box;
}

}  // namespace igemm
}  // namespace cuda
}  // namespace alexconv
