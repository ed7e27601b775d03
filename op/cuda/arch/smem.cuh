// Shared-memory addresses as PTX wants them, and the fence between the generic proxy
// (ordinary loads and stores) and the async proxy (TMA copies, wgmma operand reads).
#pragma once

#include <cstdint>

namespace alexconv {
namespace cuda {

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Orders this thread's shared-memory accesses through the generic proxy before
// later ones through the async proxy (TMA copies, wgmma operand reads) (sm_90).
__device__ __forceinline__ void fence_async_proxy() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

}  // namespace cuda
}  // namespace alexconv
