// Hopper bulk copies (sm_90): TMA tensor boxes through a tensor map (common/tma_map.h
// encodes it on the host), plain bulk copies and L2 prefetches. Each copy's bytes
// complete a phase of an mbarrier (arch/mbarrier.cuh).
#pragma once

#include <cstdint>

#include "smem.cuh"

namespace alexconv {
namespace cuda {

// One TMA copy of a 4D box (x, y, channel, image) of `map` into shared memory at
// `dst`; its bytes complete `bar`'s phase (sm_90).
__device__ __forceinline__ void tma_load_box(uint32_t dst, const void* map, int x, int y,
                                             int channel, int image, uint64_t* bar) {
#if ALEXCONV_SM90_ASYNC_PROXY
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
#if ALEXCONV_SM90_ASYNC_PROXY
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
#if ALEXCONV_SM90_ASYNC_PROXY
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
#if ALEXCONV_SM90_ASYNC_PROXY
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
#else
  (void)src, (void)bytes;
  __trap();
#endif
}

}  // namespace cuda
}  // namespace alexconv
