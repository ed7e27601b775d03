// How the space-to-depth kernel (s2d.cu) sees the problem and cuts it into
// CTA tiles, shared by the host planner and the kernel.
//
// Stride 4 folds into channels: input element (c, 4Y + ry - pad, 4X + rx - pad) is
// phase (ry, rx) of cell (Y, X), and the 11x11 stride-4 convolution becomes a 3x3
// stride-1 one over 16 phases per input channel (taps ky = 4 dy + ry, kx = 4 dx + rx;
// ky or kx = 11 are zero weights). Output pixel (oy, ox) at tap (dy, dx) reads cell
// (oy + dy, ox + dx). Numbering an image's pixels row-major over a "virtual" width
// wv = out_w + 2 makes that cell's number the pixel's number plus dy * wv + dx: one
// shift per tap for every pixel, so a tap's A operand is a contiguous run of cells
// and the tensor cores read it from shared memory directly. The 2 extra columns per
// row are computed and dropped.
//
// Wide images are cut into vertical strips (each with its own virtual width) so
// that a tile's cells fit a window slot. Tiles are numbered with the strips side by
// side, as the register-gather kernel's are (igemm/tile_plan.h), and CTAs take them
// strided: the overlapping windows of neighbouring tiles are read from L2 at about the
// same time (both measured faster than the alternatives: docs/perf-notes.md, "The
// measurements behind the code's choices").
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../conv1_geometry.h"
#include "../common/tile_order.h"  // Divider, strip_columns, kMaxIndex
#include "../common/warp_roles.h"  // kTilePixels: 3 wgmma warpgroups x 64 rows

namespace alexconv {
namespace cuda {
namespace s2d {

constexpr int kTaps1D = 3;                 // ceil(kKernel / kStride)
constexpr int kTapSteps = kTaps1D * kTaps1D;
constexpr int kPlaneRecords = 512;         // cells a window slot holds per plane
// Tile numbers, strip-local pixel numbers and strip x out_w products stay at or below
// kMaxIndex (igemm/tile_plan.h). A plan past it is not plannable and the register-gather
// kernel takes the problem: the product rules out images of more than about 472,000
// output columns with 512-cell planes (fewer with the portable kernel's 384: narrower strips).
static_assert(kKernel <= kTaps1D * kStride && kKernel > (kTaps1D - 1) * kStride, "3x3 taps");

struct Plan {
  int64_t out_h = 0, out_w = 0;
  int64_t strips = 0;           // 0: no strip width fits (not plannable)
  int64_t wv = 0;               // virtual width: the widest strip + 2
  int64_t cells = 0;            // cells staged per window (each of a plane's first `cells`)
  // Where a window starts: at the first cell of its tile's first row (the Hopper kernel, whose
  // copy engine stages whole rows), or at its tile's first pixel's own cell (`from_tile`: the
  // portable kernel, whose producers load unit by unit; a window is then wv - 1 cells shorter,
  // so 224 and 256 take one strip of 352- or 384-cell planes, not two).
  bool from_tile = false;
  int64_t tiles_per_strip = 0, tiles = 0;
  int64_t box_cols = 0, box_rows = 0;  // TMA staging: every window's box; 0: none
  bool box_in_units = false;           // copied through the map of 16-byte units
  // Row-span staging (s2d/copies_sm90.cuh): box_rows rows per window (box_cols stays 0),
  // and the input's last 16-byte boundary (an address), past which no copy reads.
  int64_t span_end = 0;
  int64_t pad = kPad;  // the call's padding (Problem::pad), which places each tile's window
  Divider by_per_image, by_strips, by_wv;
};

struct Tile {
  int64_t n = 0;
  int64_t x0 = 0, width = 0;    // the strip's output columns
  int64_t v0 = 0;               // first virtual pixel (strip-local, row-major over wv)
  int64_t oy0 = 0;              // its row: the window's first cell row
  // v0 - oy0 * wv is the first pixel's column in row oy0 (of wv): where it lies in the window
  // (base) or where the window starts in that row (skip), as plan.from_tile says.
  int64_t base = 0;             // the first pixel's cell in the window
  int64_t skip = 0;             // the window's first cell's column in row oy0
  int64_t pad = 0;              // the call's padding
  // The input row and column of cell (oy0, x0)'s phase (0, 0): cell (Y, X) holds input rows
  // 4 Y - pad .. 4 Y - pad + 3.
  ALEXCONV_HOST_DEVICE int64_t iy0() const { return oy0 * kStride - pad; }
  ALEXCONV_HOST_DEVICE int64_t ix0() const { return x0 * kStride - pad; }
};

// Cells a window must hold: a tile's last pixel at tap (2, 2) reads cell
// base + kTilePixels - 1 + 2 wv + 2, with base < wv (0 from_tile).
ALEXCONV_HOST_DEVICE inline int64_t window_cells(int64_t wv, bool from_tile) {
  return (from_tile ? 2 * wv + 1 : 3 * wv) + kTilePixels + 1;
}
// Input rows a row-start window spans: its cell rows, 4 each (the copy engine's boxes and spans).
ALEXCONV_HOST_DEVICE inline int64_t window_rows(const Plan& plan) { return kStride * ((plan.cells + plan.wv - 1) / plan.wv); }

// records: the cells a window slot's plane holds (kPlaneRecords, or a portable fit's);
// from_tile: where windows start (Plan); pad: the call's padding (Problem::pad).
inline Plan make_plan(int64_t batch, int64_t out_h, int64_t out_w, int64_t records = kPlaneRecords,
                      bool from_tile = false, int64_t pad = kPad) {
  Plan plan;
  plan.pad = pad;
  plan.out_h = out_h;
  plan.out_w = out_w;
  plan.from_tile = from_tile;
  if (out_h <= 0 || out_w <= 0) return plan;
  for (int64_t strips = 1; strips <= out_w; ++strips) {
    const int64_t widest = (out_w + strips - 1) / strips;
    if (window_cells(widest + 2, from_tile) <= records) {
      plan.strips = strips;
      plan.wv = widest + 2;
      break;
    }
  }
  if (plan.strips == 0) return plan;
  plan.cells = window_cells(plan.wv, from_tile);
  plan.tiles_per_strip = (out_h * plan.wv + kTilePixels - 1) / kTilePixels;
  plan.tiles = batch * plan.strips * plan.tiles_per_strip;
  if (plan.tiles_per_strip > kMaxIndex / kTilePixels || plan.strips * out_w > kMaxIndex ||
      batch > kMaxIndex / (plan.strips * plan.tiles_per_strip)) {
    return Plan{};  // see kMaxIndex
  }
  plan.by_per_image = Divider(plan.strips * plan.tiles_per_strip);
  plan.by_strips = Divider(plan.strips);
  plan.by_wv = Divider(plan.wv);
  return plan;
}

// 32-bit divisions: make_plan keeps every operand below 2^31 (kMaxIndex).
ALEXCONV_HOST_DEVICE inline Tile decode_tile(const Plan& plan, int64_t index) {
  Tile t;
  const int i = int(index), n = plan.by_per_image.small(i);
  const int in_image = i - n * int(plan.by_per_image.divisor);
  const int in_strip = plan.by_strips.small(in_image);
  const int strip = in_image - in_strip * int(plan.strips);
  const StripColumns columns = strip_columns(plan.by_strips, strip, int(plan.out_w));
  t.n = n;
  t.x0 = columns.x0;
  t.width = columns.width;
  t.pad = plan.pad;
  t.v0 = int64_t(in_strip) * kTilePixels;
  t.oy0 = plan.by_wv.small(int(t.v0));
  const int64_t column = t.v0 - t.oy0 * plan.wv;
  t.base = plan.from_tile ? 0 : column;
  t.skip = plan.from_tile ? column : 0;
  return t;
}

}  // namespace s2d
}  // namespace cuda
}  // namespace alexconv
