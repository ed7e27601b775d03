// Named barriers of one warp role (arch/named_barriers.cuh lists the ids).
#pragma once

#include "../arch/named_barriers.cuh"
#include "warp_roles.h"

namespace alexconv {
namespace cuda {

// The producer warps alone (consumers never wait on it): every producer is done
// with a shared window before any refills or releases it.
__device__ __forceinline__ void producer_barrier() {
  named_barrier_sync<kProducerWarps4, kProducerThreads>();
}

// Consumer warpgroup `group` (4 warps) alone: its epilogue's staged block.
__device__ __forceinline__ void group_barrier(int group) {
  named_barrier_sync<128>(kFirstConsumerGroup + group);
}

}  // namespace cuda
}  // namespace alexconv
