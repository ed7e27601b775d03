// cp.async (sm_80+): copies from global to shared memory without staging registers,
// in groups a thread commits and later waits for. A copy whose src-size is below its
// unit size zero-fills the rest: window padding arrives as zeros.
#pragma once

#include <cstdint>

namespace alexconv {
namespace cuda {

template <int kBytes>
__device__ __forceinline__ void copy_async(uint32_t smem_addr, const void* src, int src_bytes) {
  static_assert(kBytes == 4 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes; we use 4 and 16");
  if constexpr (kBytes == 16) {
    // .cg: through L2 only; the next tile's window is another CTA's business.
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(src),
                 "r"(src_bytes)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr), "l"(src),
                 "r"(src_bytes)
                 : "memory");
  }
}
__device__ __forceinline__ void copy_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace cuda
}  // namespace alexconv
