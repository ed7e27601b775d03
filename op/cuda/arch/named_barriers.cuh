// Named barriers (bar.sync with an id and a thread count): the one list of the ids the
// kernels use. Barrier 0 is __syncthreads(); ids here must not overlap while a CTA's
// roles wait on them at the same time.
#pragma once

namespace alexconv {
namespace cuda {

enum NamedBarrier : int {
  kCtaBarrier = 0,          // __syncthreads(): every thread of the CTA
  kFirstConsumerGroup = 1,  // 1, 2, 3: the consumer warps of tile pixels 64g.. staging their epilogue (g = id - 1)
  kProducerWarps4 = 4,      // the producer warps converting a shared window
};
constexpr int kNamedBarriersUsed = 5;
static_assert(kNamedBarriersUsed <= 16, "a CTA has 16 hardware barriers");

// Waits at barrier `id` until kThreads threads (whole warps) have arrived.
template <int kThreads>
__device__ __forceinline__ void named_barrier_sync(int id) {
  static_assert(kThreads % 32 == 0, "named barriers count whole warps");
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(kThreads) : "memory");
}
// The same with the id known at compile time (an immediate in the instruction).
template <int kId, int kThreads>
__device__ __forceinline__ void named_barrier_sync() {
  static_assert(kThreads % 32 == 0 && kId > 0 && kId < kNamedBarriersUsed, "a listed id, whole warps");
  asm volatile("bar.sync %0, %1;\n" ::"n"(kId), "n"(kThreads) : "memory");
}

}  // namespace cuda
}  // namespace alexconv
