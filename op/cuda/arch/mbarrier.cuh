// mbarrier wrappers (sm_80+; arrival counts and transaction bytes sm_90): the
// barriers of the producer/consumer rings. A barrier completes a phase when its
// expected arrivals (and, with expect_tx, bytes) are in; waiters name the parity.
#pragma once

#include <cstdint>

#include "smem.cuh"

namespace alexconv {
namespace cuda {

__device__ __forceinline__ void barrier_init(uint64_t* bar, int arrivals) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(arrivals)
               : "memory");
}

// Makes initialised barriers visible to the async proxy (TMA's complete_tx).
__device__ __forceinline__ void barrier_init_fence() {
#if ALEXCONV_SM90_ASYNC_PROXY
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
#if ALEXCONV_SM90_ASYNC_PROXY
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)),
               "r"(bytes)
               : "memory");
#else
  __trap();
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

}  // namespace cuda
}  // namespace alexconv
