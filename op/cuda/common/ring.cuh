// What every producer/consumer kernel walks: a position in a ring of slots, the sequence of
// (tile, input channel) stages a CTA of a persistent grid works on, and the protocol both
// roles follow over the ring (Pipeline). Producers and consumers each keep their own
// positions and see the same sequence; the families' slots, and barriers beyond the
// pipeline's, are theirs (igemm/smem_layout.cuh, s2d/ring.cuh).
#pragma once

#include <cstdint>
#include <utility>

#include "../../conv1_geometry.h"
#include "../arch/mbarrier.cuh"

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

// The producer/consumer protocol over a ring of kSlots slots, one mbarrier pair per slot.
// Producers acquire a slot (wait until its previous use is released), fill it and commit it;
// consumers wait for the committed stage, read it and release the slot. Every call takes the
// position of the stage (its phase travels with it), so no caller computes a parity. The
// families' rings start with it (igemm::RingBarriers, s2d::Ring) and add their own barriers.
template <int kSlots>
struct Pipeline {
  uint64_t full[kSlots];   // committed: every producer thread (or the count given) arrived
  uint64_t empty[kSlots];  // released: every consumer thread arrived

  // Producers: the slot's previous use (one phase back) is released.
  __device__ __forceinline__ void producer_acquire(const RingPos<kSlots>& pos) {
    barrier_wait(&empty[pos.slot], pos.phase ^ 1);
  }
  __device__ __forceinline__ void producer_commit(const RingPos<kSlots>& pos) { barrier_arrive(&full[pos.slot]); }
  // A commit counting for `arrivals` producer threads (one thread for its warp).
  __device__ __forceinline__ void producer_commit(const RingPos<kSlots>& pos, uint32_t arrivals) {
    barrier_arrive(&full[pos.slot], arrivals);
  }
  // Consumers (and producers that read what every producer warp wrote): the stage is committed.
  __device__ __forceinline__ void consumer_wait(const RingPos<kSlots>& pos) { barrier_wait(&full[pos.slot], pos.phase); }
  // The slot may be refilled (by slot: a consumer releasing a stage it no longer holds a position of).
  __device__ __forceinline__ void consumer_release(int slot) { barrier_arrive(&empty[slot]); }
  __device__ __forceinline__ void consumer_release(const RingPos<kSlots>& pos) { consumer_release(pos.slot); }
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
