// The ring of window slots between the implicit GEMM's producer warps (which
// stage and convert one input channel's window per stage) and its consumer
// warps (which multiply from it). Each slot has three mbarriers: `full` completes
// when every producer thread has arrived (the window is ready), `empty` when
// every consumer thread has (the slot may be refilled), and `landed` when a
// tensor-memory-access (TMA) copy into the slot has delivered its bytes. Nothing
// else synchronises the two roles, so copies, conversion, MMAs and epilogues of
// different stages overlap.
#pragma once

#include <cstdint>
#include <utility>

#include "../conv1_geometry.h"
#include "conv1_tiling.h"

namespace alexconv {
namespace cuda {

struct RingBarriers {
  uint64_t full[kStages];
  uint64_t empty[kStages];
  uint64_t landed[kStages];
};

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void barrier_init(uint64_t* bar, int arrivals) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(arrivals)
               : "memory");
}

// Makes initialised barriers visible to the async proxy (TMA's complete_tx).
__device__ __forceinline__ void barrier_init_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// Release: this thread's earlier shared-memory writes (and reads) are ordered
// before the waiters that see the phase complete.
__device__ __forceinline__ void barrier_arrive(uint64_t* bar) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared.b64 state, [%0];\n}\n" ::"r"(
                   smem_address(bar))
               : "memory");
}

// The same for `count` arrivals at once: one thread arriving for its whole warp (sm_90).
__device__ __forceinline__ void barrier_arrive(uint64_t* bar, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared.b64 state, [%0], %1;\n}\n" ::"r"(
                   smem_address(bar)),
               "r"(count)
               : "memory");
#else
  (void)bar, (void)count;
  __trap();
#endif
}

// Arrives and announces `bytes` of asynchronous copies that will complete the
// phase along with the arrival (sm_90).
__device__ __forceinline__ void barrier_arrive_expect_bytes(uint64_t* bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)),
               "r"(bytes)
               : "memory");
#else
  __trap();
#endif
}

// One TMA copy of a 4D box (x, y, channel, image) of `map` into shared memory at
// `dst`; its bytes complete `bar`'s phase (sm_90).
__device__ __forceinline__ void tma_load_box(uint32_t dst, const void* map, int x, int y,
                                             int channel, int image, uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(map), "r"(x), "r"(y), "r"(channel), "r"(image), "r"(smem_address(bar))
      : "memory");
#else
  __trap();
#endif
}

// The same through a map of rows cut into 16-byte units (encode_window_map_in_units):
// the box starts at 16-byte unit `unit` of row y.
__device__ __forceinline__ void tma_load_box_in_units(uint32_t dst, const void* map, int unit, int y,
                                                      int channel, int image, uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];\n" ::"r"(dst),
      "l"(map), "r"(0), "r"(unit), "r"(y), "r"(channel), "r"(image), "r"(smem_address(bar))
      : "memory");
#else
  __trap();
#endif
}

// One bulk copy of `bytes` contiguous bytes from global memory into shared memory at
// `dst` (source, destination and size 16-byte aligned; no tensor map); its bytes
// complete `bar`'s phase (sm_90).
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(smem_address(bar))
      : "memory");
#else
  (void)dst, (void)src, (void)bytes, (void)bar;
  __trap();
#endif
}

// Asks for `bytes` contiguous bytes of global memory (16-byte aligned start and size)
// to be brought into L2; nothing to wait on (sm_90).
__device__ __forceinline__ void bulk_prefetch_l2(const void* src, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
#else
  (void)src, (void)bytes;
  __trap();
#endif
}

// Orders this thread's shared-memory accesses through the generic proxy before
// later ones through the async proxy (TMA copies, wgmma operand reads) (sm_90).
__device__ __forceinline__ void fence_async_proxy() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
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

// A named barrier of the 4 producer warps (consumers never wait on it).
__device__ __forceinline__ void producer_barrier() {
  asm volatile("bar.sync 4, %0;\n" ::"n"(kProducerThreads) : "memory");
}

// A position in the ring: the slot and the parity of the phase its current use
// completes.
template <int kSlots = kStages>
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
// Plan: a tiling plan with `tiles` and a decode_tile(plan, index) (conv1_tiling.h,
// conv1_s2d_plan.h).
template <class Plan = TilePlan>
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
