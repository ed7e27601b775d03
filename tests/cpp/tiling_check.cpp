// Host-side check of the CUDA implicit GEMM's tiling plan (op/cuda/igemm/tile_plan.h,
// plain C++ shared with the kernel): for each shape given as "N H W" on stdin,
// every output pixel belongs to exactly one tile, every tile's input window fits a
// shared-memory slot (its copy units and skew included) and stays inside the image's
// window, and pitches are 32-aligned; where a TMA box (window_box) exists, every
// tile's window and skew fit inside it. First, the plan's Divider against plain
// division, near every power of two and past the 2^31 limit of its fast path.
// Then the space-to-depth kernel's plan (op/cuda/s2d/plan.h): every output
// pixel is exactly one tile's, and each of its 9 tap cells is the cell its
// receptive field needs (no wrap into the next row) and lies inside the window a
// slot holds, and its 32-bit limit; the register-gather plan's 32-bit limits too.
// The register-gather plan is checked in the contiguous-run order (CtaOrder) a launch
// on `sms` one-CTA multiprocessors gives multi-strip plans: each CTA's turns take
// consecutive tile numbers (and the coverage check makes the order a permutation).
// Prints "ok" or the first violation; run by tests/test_tiling.py.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "../../op/cuda/s2d/plan.h"
#include "../../op/cuda/igemm/tile_plan.h"

using namespace alexconv;
using namespace alexconv::cuda;
using namespace alexconv::cuda::igemm;

bool dividers_ok() {
  std::vector<int64_t> values;
  for (int64_t v = 0; v < 3000; ++v) values.push_back(v);
  for (int bit = 2; bit <= 40; ++bit) {
    for (int64_t delta = -3; delta <= 3; ++delta) values.push_back((int64_t(1) << bit) + delta);
  }
  for (int64_t v = 3; v < (int64_t(1) << 31); v = v * 7 + 5) values.push_back(v);
  for (int64_t d : values) {
    if (d < 1) continue;
    const Divider by(d);
    for (int64_t n : values) {
      if (by(n) != n / d) {
        std::printf("Divider(%lld)(%lld) = %lld, not %lld\n", (long long)d, (long long)n,
                    (long long)by(n), (long long)(n / d));
        return false;
      }
    }
  }
  return true;
}

// The space-to-depth plan's 32-bit limit (kMaxIndex): at the largest batch it
// plans, sampled tiles (the last included) decode as plain 64-bit division says;
// one image more, an image whose strip needs 2^31 pixel numbers, or one so wide that
// strips x out_w reaches 2^31, is not plannable.
bool s2d_limits_ok() {
  const long shapes[][2] = {{55, 55}, {56, 56}, {1, 1}, {126, 126}, {3, 999}};
  for (const auto& shape : shapes) {
    const long oh = shape[0], ow = shape[1];
    const s2d::Plan one = s2d::make_plan(1, oh, ow);
    const int64_t per_image = one.strips * one.tiles_per_strip, batch = kMaxIndex / per_image;
    const s2d::Plan plan = s2d::make_plan(batch, oh, ow);
    if (plan.strips == 0 || s2d::make_plan(batch + 1, oh, ow).strips != 0) {
      std::printf("s2d plan limit wrong at batch %lld for %ld x %ld\n", (long long)batch, oh, ow);
      return false;
    }
    for (int64_t t = plan.tiles - 1; t >= 0; t -= 1 + t / 97) {
      const s2d::Tile got = s2d::decode_tile(plan, t);
      const int64_t n = t / per_image, in_image = t % per_image, in_strip = in_image / plan.strips,
                    strip = in_image % plan.strips, x0 = strip * ow / plan.strips,
                    v0 = in_strip * kTilePixels, oy0 = v0 / plan.wv;
      if (got.n != n || got.x0 != x0 || got.width != (strip + 1) * ow / plan.strips - x0 ||
          got.v0 != v0 || got.oy0 != oy0 || got.base != v0 - oy0 * plan.wv) {
        std::printf("s2d tile %lld of batch %lld (%ld x %ld) decodes wrong\n", (long long)t,
                    (long long)batch, oh, ow);
        return false;
      }
    }
  }
  // One image of 2^31 pixel numbers in its one strip; images wide enough for
  // strips x out_w to pass 2^31 (4545 strips of 472,600 columns), and just below.
  if (s2d::make_plan(1, kMaxIndex / 50 + 1, 48).strips != 0 ||
      s2d::make_plan(1, 1, 472600).strips != 0 || s2d::make_plan(1, 1, 472400).strips == 0) {
    std::printf("s2d plan limit wrong for a long strip or a wide image\n");
    return false;
  }
  return true;
}

// The register-gather plan's 32-bit limit (kMaxIndex): strip-local pixel numbers,
// kTilePixels past a tile's first included, stay within it. For each strip width,
// the tallest plannable image is found by bisection; one row more must bring the
// strip's pixels to the limit (so the limit is not set lower than it needs to be).
bool gather_limits_ok() {
  for (const long ow : {1L, 55L, 146L, 999L}) {
    long lo = 1, hi = long(kMaxIndex);  // plannable at lo; not at hi (checked below)
    if (make_tile_plan(1, lo, ow).strips == 0 || make_tile_plan(1, hi, ow).strips != 0) {
      std::printf("gather plan limit: %ld columns plannable at no height, or at every one\n", ow);
      return false;
    }
    while (hi - lo > 1) {
      const long mid = lo + (hi - lo) / 2;
      (make_tile_plan(1, mid, ow).strips > 0 ? lo : hi) = mid;
    }
    const TilePlan at = make_tile_plan(1, lo, ow);
    const int64_t widest = (ow + at.strips - 1) / at.strips;
    if (at.tiles_per_strip * at.tile_pixels + kTilePixels > kMaxIndex ||
        (lo + 1) * widest <= kMaxIndex - at.tile_pixels - kTilePixels) {
      std::printf("gather plan limit wrong for %ld columns: tallest plannable %ld rows\n", ow, lo);
      return false;
    }
  }
  // decode_tile's 32-bit arithmetic: at the largest batch planned, sampled tiles (the
  // last included, in both tile orders) decode as 64-bit division says; one image more is
  // not plannable.
  const long shapes[][2] = {{55, 55}, {1, 1}, {63, 292}, {5, 999}};
  for (const auto& shape : shapes) {
    const long oh = shape[0], ow = shape[1];
    const TilePlan one = make_tile_plan(1, oh, ow);  // one slot: the largest tiles, as a large batch gets
    const int64_t per_image = one.strips * one.tiles_per_strip, batch = kMaxIndex / per_image;
    TilePlan plan = make_tile_plan(batch, oh, ow, 132);
    if (plan.strips == 0 || plan.tiles_per_strip != one.tiles_per_strip ||
        make_tile_plan(batch + 1, oh, ow, 132).strips != 0) {
      std::printf("gather plan limit wrong at batch %lld for %ld x %ld\n", (long long)batch, oh, ow);
      return false;
    }
    for (int runs = 0; runs < 2; ++runs) {
      if (runs) plan.order = contiguous_runs(plan.tiles, 132);
      for (int64_t t = plan.tiles - 1; t >= 0; t -= 1 + t / 89) {
        int64_t number = t;
        if (runs) {
          const int64_t turn = t / 132, cta = t % 132;
          number = cta * plan.order.per_cta + std::min<int64_t>(cta, plan.order.extra) + turn;
        }
        const Tile got = decode_tile(plan, t);
        const int64_t n = number / per_image, in_image = number % per_image,
                      in_strip = in_image / plan.strips, strip = in_image % plan.strips,
                      x0 = strip * ow / plan.strips, width = (strip + 1) * ow / plan.strips - x0,
                      q_begin = in_strip * plan.tile_pixels,
                      q_end = std::min<int64_t>(q_begin + plan.tile_pixels, oh * width);
        const bool empty = q_end <= q_begin;  // the last tile of a narrower strip may be
        if (got.n != n || got.x0 != x0 || got.width != width || got.q_begin != q_begin ||
            got.q_end != (empty ? q_begin : q_end) || (!empty && got.oy0 != q_begin / width)) {
          std::printf("tile %lld of batch %lld (%ld x %ld, runs %d) decodes wrong\n", (long long)t,
                      (long long)batch, oh, ow, runs);
          return false;
        }
      }
    }
  }
  // Images so wide that strips x out_w passes 2^31 (strip_columns): the widest plannable
  // image of one row stays within it, and one column more passes it (with its strips or
  // one more), so the limit is no lower than it needs to be.
  long lo = 1, hi = long(kMaxIndex);
  while (hi - lo > 1) {
    const long mid = lo + (hi - lo) / 2;
    (make_tile_plan(1, 1, mid).strips > 0 ? lo : hi) = mid;
  }
  const TilePlan widest = make_tile_plan(1, 1, lo);
  if (widest.strips * lo > kMaxIndex || (widest.strips + 1) * (lo + 1) <= kMaxIndex) {
    std::printf("gather plan strip limit wrong: widest plannable %ld columns\n", lo);
    return false;
  }
  return true;
}

// Sets contiguous runs for a grid of min(tiles, sms) CTAs; false (and a message)
// where some CTA's turns are not consecutive tile numbers.
bool order_ok(TilePlan& plan, long sms) {
  const long grid = std::min<long>(plan.tiles, sms);
  plan.order = contiguous_runs(plan.tiles, grid);
  for (long t = 0; t + grid < plan.tiles; ++t) {
    if (ordered_tile(plan.order, t + grid) != ordered_tile(plan.order, t) + 1) {
      std::printf("turn %ld of %ld tiles on %ld CTAs: tile %ld, the turn before took %ld\n",
                  t + grid, long(plan.tiles), grid, long(ordered_tile(plan.order, t + grid)),
                  long(ordered_tile(plan.order, t)));
      return false;
    }
  }
  return true;
}

// records, from_tile: the Hopper kernel's planes and row-start windows, or a portable fit's
// planes and windows from each tile's first pixel.
bool s2d_plan_ok(long n, long h, long w, long oh, long ow, long records, bool from_tile, long pad) {
  const s2d::Plan plan = s2d::make_plan(n, oh, ow, records, from_tile, pad);
  if (plan.strips == 0 || plan.cells > records || plan.wv < (ow + plan.strips - 1) / plan.strips + 2) {
    std::printf("bad s2d plan for %ld %ld %ld (%ld-cell planes): strips %ld cells %ld\n", n, h, w, records,
                long(plan.strips), long(plan.cells));
    return false;
  }
  std::vector<unsigned char> seen(size_t(n) * oh * ow, 0);
  for (long t = 0; t < plan.tiles; ++t) {
    const s2d::Tile tile = s2d::decode_tile(plan, t);
    const long column = from_tile ? tile.skip : tile.base;
    if (column < 0 || column >= plan.wv || (from_tile ? tile.base : tile.skip) != 0) {
      std::printf("s2d tile %ld of %ld %ld %ld: base %ld skip %ld\n", t, n, h, w, long(tile.base), long(tile.skip));
      return false;
    }
    // Cell (oy0, x0)'s phase (0, 0) is input (4 oy0 - pad, 4 x0 - pad): the call's padding.
    if (tile.iy0() != tile.oy0 * kStride - pad || tile.ix0() != tile.x0 * kStride - pad) {
      std::printf("s2d tile %ld of %ld %ld %ld at padding %ld: window origin (%ld, %ld)\n", t, n, h, w, pad,
                  long(tile.iy0()), long(tile.ix0()));
      return false;
    }
    for (long local = 0; local < kTilePixels; ++local) {
      const long v = tile.v0 + local, oy = v / plan.wv, x = v % plan.wv;
      if (oy >= oh || x >= tile.width) continue;  // a virtual column or a row past the image
      for (long dy = 0; dy < s2d::kTaps1D; ++dy) {
        for (long dx = 0; dx < s2d::kTaps1D; ++dx) {
          // The window's cell, and where it lies from the window's first row's first cell.
          const long cell = tile.base + local + dy * plan.wv + dx, at = cell + tile.skip;
          if (cell >= plan.cells || at / plan.wv != oy - tile.oy0 + dy || at % plan.wv != x + dx) {
            std::printf("s2d tile %ld of %ld %ld %ld: pixel (%ld, %ld) tap (%ld, %ld) reads cell %ld\n",
                        t, n, h, w, oy, x, dy, dx, cell);
            return false;
          }
        }
      }
      if (seen[(size_t(tile.n) * oh + oy) * ow + tile.x0 + x]++) {
        std::printf("s2d: pixel (%ld, %ld, %ld) in two tiles\n", long(tile.n), oy, tile.x0 + x);
        return false;
      }
    }
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) {
      std::printf("s2d: pixel %zu of %ld %ld %ld in no tile\n", i, n, h, w);
      return false;
    }
  }
  return true;
}

int main() {
  if (!dividers_ok() || !s2d_limits_ok() || !gather_limits_ok()) return 1;
  long n, h, w, sms, pad;
  while (std::scanf("%ld %ld %ld %ld %ld", &n, &h, &w, &sms, &pad) == 5) {
    const long oh = conv1_out_size<long>(h, pad), ow = conv1_out_size<long>(w, pad);
    TilePlan plan = make_tile_plan(n, oh, ow, sms, pad);
    if (plan.tile_pixels < 1 || plan.tile_pixels > kTilePixels || plan.pitch % 32 != 0 ||
        plan.pitch < window_extent((ow + plan.strips - 1) / plan.strips)) {
      std::printf("bad plan for %ld %ld %ld: pixels %ld pitch %ld\n", n, h, w,
                  long(plan.tile_pixels), long(plan.pitch));
      return 1;
    }
    if (!order_ok(plan, sms)) return 1;
    std::vector<unsigned char> seen(size_t(n) * oh * ow, 0);
    const WindowBox boxes[2] = {plan.tiles > 0 ? window_box(plan, 2) : WindowBox{},
                                plan.tiles > 0 ? window_box(plan, 4) : WindowBox{}};
    for (long t = 0; t < plan.tiles; ++t) {
      const Tile tile = decode_tile(plan, t);
      // The window's (0, 0) is input (4 oy0 - pad, 4 x0 - pad), the skew within a copy unit.
      if (tile.rows > 0 && (tile.iy0() != tile.oy0 * kStride - pad || tile.ix0() != tile.x0 * kStride - pad ||
                            ((tile.ix0() - window_skew(tile, 2)) % 8 + 8) % 8 != 0)) {
        std::printf("tile %ld of %ld %ld %ld at padding %ld: window origin (%ld, %ld)\n", t, n, h, w, pad,
                    long(tile.iy0()), long(tile.ix0()));
        return 1;
      }
      for (int b = 0; b < 2; ++b) {
        const int bytes = 2 * (b + 1);
        if (boxes[b].cols > 0 && tile.rows > 0 &&
            (window_skew(tile, bytes) + tile.cols > boxes[b].cols || tile.rows > boxes[b].rows)) {
          std::printf("tile %ld of %ld %ld %ld outside its %d-byte TMA box\n", t, n, h, w, bytes);
          return 1;
        }
      }
      if (tile.rows * plan.pitch > kSlotElems) {
        std::printf("tile %ld of %ld %ld %ld overflows its slot\n", t, n, h, w);
        return 1;
      }
      // A row's copy units, skew included, end inside the pitch for 4- and 2-byte elements.
      for (int bytes = 2; bytes <= 4; bytes += 2) {
        const long unit = kCopyBytes / bytes;
        const long end = (window_skew(tile, bytes) + tile.cols + unit - 1) / unit * unit;
        if (tile.rows > 0 && end > plan.pitch) {
          std::printf("tile %ld of %ld %ld %ld: %d-byte row units end at %ld, pitch %ld\n", t,
                      n, h, w, bytes, end, long(plan.pitch));
          return 1;
        }
      }
      for (long q = tile.q_begin; q < tile.q_end; ++q) {
        const long oy = q / tile.width, x = tile.x0 + q % tile.width;
        // The pixel's 11x11 receptive field must lie inside the staged window.
        if (oy < tile.oy0 || (oy - tile.oy0) * kStride + kKernel > tile.rows ||
            (q % tile.width) * kStride + kKernel > tile.cols || oy >= oh || x >= ow) {
          std::printf("pixel (%ld, %ld) of tile %ld outside its window\n", oy, x, t);
          return 1;
        }
        if (seen[(size_t(tile.n) * oh + oy) * ow + x]++) {
          std::printf("pixel (%ld, %ld, %ld) in two tiles\n", long(tile.n), oy, x);
          return 1;
        }
      }
    }
    for (size_t i = 0; i < seen.size(); ++i) {
      if (!seen[i]) {
        std::printf("pixel %zu of %ld %ld %ld in no tile\n", i, n, h, w);
        return 1;
      }
    }
    // The Hopper kernel's planes; the portable kernel's (s2d_mma_sync.cu: Thirds, Whole and Halves).
    if (!s2d_plan_ok(n, h, w, oh, ow, s2d::kPlaneRecords, false, pad) ||
        !s2d_plan_ok(n, h, w, oh, ow, 352, true, pad) || !s2d_plan_ok(n, h, w, oh, ow, 384, true, pad)) {
      return 1;
    }
  }
  std::printf("ok\n");
  return 0;
}
