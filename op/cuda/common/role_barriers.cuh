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

}  // namespace cuda
}  // namespace alexconv
