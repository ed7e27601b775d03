// Shared-memory addresses as PTX wants them, and the fence between the generic proxy
// (ordinary loads and stores) and the async proxy (TMA copies, wgmma operand reads).
#pragma once

#include <cstdint>

// sm_90's asynchronous proxy -- TMA and bulk copies, expect_tx, its fences -- is PTX ISA 8.0,
// which CUDA 12 brought: a CUDA 11.8 build for sm_90 (no sm_90a, so no TMA kernel is ever
// launched) compiles these wrappers without it.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDACC_VER_MAJOR__) && __CUDACC_VER_MAJOR__ >= 12
#define ALEXCONV_SM90_ASYNC_PROXY 1
#else
#define ALEXCONV_SM90_ASYNC_PROXY 0
#endif

namespace alexconv {
namespace cuda {

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Orders this thread's shared-memory accesses through the generic proxy before
// later ones through the async proxy (TMA copies, wgmma operand reads) (sm_90).
__device__ __forceinline__ void fence_async_proxy() {
#if ALEXCONV_SM90_ASYNC_PROXY
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

}  // namespace cuda
}  // namespace alexconv
