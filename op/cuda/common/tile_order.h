// What both implicit-GEMM tilings share: the 32-bit index bound, vertical strips of
// an image's output columns, and the order in which a persistent grid's CTAs take
// tiles (strided turns, or contiguous runs).
#pragma once

#include <cstdint>

#include "divider.h"

namespace alexconv {
namespace cuda {

// Tile numbers and strip-local pixel numbers stay at or below this in every plan the
// kernels run (both plans), so that the kernels divide them with Divider::small's
// 32-bit multiply-high: the 64-bit fallback is a call, which costs registers even untaken
// (docs/perf-notes.md, "Constraints found by measurement"). A plan past it is not plannable
// (the direct kernel runs it); reaching it takes 2^31 tiles or strips of 2^31 output pixels.
constexpr int64_t kMaxIndex = (int64_t(1) << 31) - 1;

// The output columns of strip s of `strips` (by_strips divides by it):
// [s * out_w / strips, (s + 1) * out_w / strips). Both plans keep strips * out_w
// within kMaxIndex, so this is 32-bit arithmetic.
struct StripColumns {
  int x0, width;
};
ALEXCONV_HOST_DEVICE inline StripColumns strip_columns(const Divider& by_strips, int strip,
                                                       int out_w) {
  const int x0 = by_strips.small(strip * out_w);
  return {x0, by_strips.small((strip + 1) * out_w) - x0};
}

// A persistent grid's CTAs walk indices blockIdx.x, + gridDim.x, ... (their turns).
// By default turn i takes tile i: at any time the CTAs work on neighbouring tiles,
// whose overlapping windows come from DRAM once and from L2 for the rest. Over a
// long run the CTAs drift apart, and the neighbours of a multi-strip plan stop
// meeting in L2, so its DRAM reads grow with the batch. Contiguous runs map the
// turns so that CTA b takes the tiles [b * per_cta + min(b, extra), ...): per_cta,
// or one more for the first `extra` CTAs, as many as striding gives it. Its tiles
// then follow one another at any batch (every window from DRAM), and they lose the
// front's sharing, so runs pay only when they are long: slower than striding at
// tens of turns per CTA, faster at hundreds. docs/perf-notes.md, "Off the targets'
// layout", has the DRAM reads of both orders and the turn counts where runs start
// to pay, for multi-strip plans in float32 at 256x256 and 512x512.
struct CtaOrder {
  Divider by_grid;  // 1: the identity
  int64_t per_cta = 0, extra = 0;
};
constexpr int64_t kMinTurnsForRuns = 64;

inline CtaOrder contiguous_runs(int64_t tiles, int64_t grid) {
  CtaOrder order;
  if (grid < 1 || tiles < 1) return order;
  order.by_grid = Divider(grid);
  order.per_cta = tiles / grid;
  order.extra = tiles - order.per_cta * grid;
  return order;
}

// In 32 bits: tile numbers stay at or below kMaxIndex (make_tile_plan).
ALEXCONV_HOST_DEVICE inline int ordered_tile(const CtaOrder& order, int index) {
  const int turn = order.by_grid.small(index);
  const int cta = index - turn * int(order.by_grid.divisor);
  const int extra = int(order.extra);
  return cta * int(order.per_cta) + (cta < extra ? cta : extra) + turn;
}

}  // namespace cuda
}  // namespace alexconv
