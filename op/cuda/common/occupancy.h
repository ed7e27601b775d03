// How many CTAs of a persistent kernel stay resident per multiprocessor, with its
// dynamic shared memory opted in. The opt-in and the occupancy query cost
// microseconds of host time per call, which small batches would pay on every
// launch: they run once per kernel and device.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace alexconv {
namespace cuda {

template <auto kKernel>
cudaError_t resident_ctas_per_sm(size_t smem, int threads, int& per_sm) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached[kMaxDevices];  // 0: not configured yet
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  per_sm = dev < kMaxDevices ? cached[dev].load(std::memory_order_relaxed) : 0;
  if (per_sm > 0) return cudaSuccess;
  err = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, threads, smem);
  if (err != cudaSuccess) return err;
  per_sm = std::max(per_sm, 1);
  // Threads racing here compute and store the same value.
  if (dev < kMaxDevices) cached[dev].store(per_sm, std::memory_order_relaxed);
  return cudaSuccess;
}

// The persistent grid of a kernel of `threads` threads: every CTA resident at once on the
// device's `sm_count` multiprocessors, `groups` CTAs of a tile side by side (channel groups),
// and no more CTAs than tiles.
template <auto kKernel>
cudaError_t persistent_grid(size_t smem, int threads, int64_t tiles, int sm_count, int groups, int64_t& grid) {
  int per_sm = 0;
  const cudaError_t err = resident_ctas_per_sm<kKernel>(smem, threads, per_sm);
  if (err != cudaSuccess) return err;
  grid = std::min<int64_t>(tiles, std::max<int64_t>(int64_t(per_sm) * sm_count / groups, 1));
  return cudaSuccess;
}

}  // namespace cuda
}  // namespace alexconv
