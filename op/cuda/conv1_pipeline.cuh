// The ring of window slots between the implicit GEMM's producer warps (which
// stage and convert one input channel's window per stage) and its consumer
// warps (which multiply from it). Each slot has two mbarriers: `full` completes
// when every producer thread has arrived (the window is ready), `empty` when
// every consumer thread has (the slot may be refilled). Nothing else
// synchronises the two roles, so copies, conversion, MMAs and epilogues of
// different stages overlap.
#pragma once

#include <cstdint>

#include "../conv1_geometry.h"
#include "conv1_tiling.h"

namespace alexconv {
namespace cuda {

struct RingBarriers {
  uint64_t full[kStages];
  uint64_t empty[kStages];
};

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void barrier_init(uint64_t* bar, int arrivals) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(arrivals)
               : "memory");
}

// Release: this thread's earlier shared-memory writes (and reads) are ordered
// before the waiters that see the phase complete.
__device__ __forceinline__ void barrier_arrive(uint64_t* bar) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared.b64 state, [%0];\n}\n" ::"r"(
                   smem_address(bar))
               : "memory");
}

// Waits (acquire) until the barrier's phase of the given parity has completed.
// On a fresh barrier the phase of parity 1 counts as completed: the first wait
// on an `empty` barrier passes at once.
__device__ __forceinline__ void barrier_wait(uint64_t* bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(smem_address(bar)),
      "r"(parity)
      : "memory");
#else
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.test_wait.parity.shared.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(smem_address(bar)),
      "r"(parity)
      : "memory");
#endif
}

// A position in the ring: the slot and the parity of the phase its current use
// completes.
struct RingPos {
  int slot = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++slot == kStages) {
      slot = 0;
      phase ^= 1;
    }
  }
};

// Walks this CTA's stages: its tiles (blockIdx.x, + gridDim.x, ...) x the input
// channels. Producers and consumers each keep their own and see the same sequence.
struct StageCursor {
  int64_t tile_index;
  Tile tile;
  int channel = 0;
  __device__ explicit StageCursor(const TilePlan& plan)
      : tile_index(blockIdx.x), tile(decode_tile(plan, blockIdx.x)) {}
  __device__ bool valid(const TilePlan& plan) const { return tile_index < plan.tiles; }
  // Returns true when the cursor moved on to a new (valid) tile.
  __device__ bool advance(const TilePlan& plan) {
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
