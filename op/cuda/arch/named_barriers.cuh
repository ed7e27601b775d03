// Named barriers (bar.sync with an id and a thread count): the one list of the ids the
// kernels use. Barrier 0 is __syncthreads(); ids here must not overlap while a CTA's
// roles wait on them at the same time.
#pragma once

namespace alexconv {
namespace cuda {

enum NamedBarrier : int {
  kCtaBarrier = 0,      // __syncthreads(): every thread of the CTA
  kEpilogueGroup0 = 1,  // the consumer warps of tile pixels 0-63 staging their epilogue
  kEpilogueGroup1 = 2,  // ... of tile pixels 64-127
  kEpilogueGroup2 = 3,  // ... of tile pixels 128-191
  kProducerWarps4 = 4,  // the producer warps converting a shared window
};
constexpr int kNamedBarriersUsed = 5;
static_assert(kEpilogueGroup1 == kEpilogueGroup0 + 1 && kEpilogueGroup2 == kEpilogueGroup0 + 2,
              "epilogue groups take consecutive ids (epilogue_group_barrier)");

// The barrier of epilogue group g (0-2: tile pixels 64 g .. 64 g + 63).
__device__ __forceinline__ int epilogue_group_barrier(int group) { return kEpilogueGroup0 + group; }
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
