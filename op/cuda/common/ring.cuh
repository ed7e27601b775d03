// What every producer/consumer kernel walks: a position in a ring of slots and the
// sequence of (tile, input channel) stages a CTA of a persistent grid works on.
// Producers and consumers each keep their own copies and see the same sequence; the
// families' slots and barriers are theirs (igemm/smem_layout.cuh, s2d/ring.cuh).
#pragma once

#include <cstdint>
#include <utility>

#include "../../conv1_geometry.h"

namespace alexconv {
namespace cuda {

// A position in the ring: the slot and the parity of the phase its current use
// completes.
template <int kSlots>
struct RingPos {
  int slot = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++slot == kSlots) {
      slot = 0;
      phase ^= 1;
    }
  }
};

// Walks this CTA's stages: its tiles (blockIdx.x, + gridDim.x, ...) x the input
// channels. Producers and consumers each keep their own and see the same sequence.
// Plan: a tiling plan with `tiles` and a decode_tile(plan, index) (igemm/tile_plan.h,
// s2d/plan.h).
template <class Plan>
struct StageCursor {
  int64_t tile_index;
  decltype(decode_tile(std::declval<const Plan&>(), int64_t(0))) tile;
  int channel = 0;
  __device__ explicit StageCursor(const Plan& plan)
      : tile_index(blockIdx.x), tile(decode_tile(plan, blockIdx.x)) {}
  __device__ bool valid(const Plan& plan) const { return tile_index < plan.tiles; }
  // Returns true when the cursor moved on to a new (valid) tile.
  __device__ bool advance(const Plan& plan) {
    if (++channel < kInChannels) return false;
    channel = 0;
    tile_index += gridDim.x;
    if (tile_index >= plan.tiles) return false;
    tile = decode_tile(plan, tile_index);
    return true;
  }
};

}  // namespace cuda
}  // namespace alexconv
