// What the skeleton kernels of the layer share (design_floor.cu, fp32_operands.cu):
// the problem's geometry at 224x224, batch 256, in 192-pixel tiles of three 64-pixel
// warpgroup blocks; the shipped float32 epilogue aimed at the real NCHW places; and
// the timing loop (median of back-to-back launches and of launches after an L2 flush).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/common/epilogue.cuh"  // store_tile: the shipped float32 NCHW epilogue
#include "micro_common.cuh"

namespace skeleton {

constexpr int64_t kPixels = 256LL * 55 * 55;  // batch 256 at 224x224
constexpr int kTilePixels = 192;
constexpr int kTiles = int((kPixels + kTilePixels - 1) / kTilePixels);  // 4034
constexpr int kConsumerGroups = 3, kThreads = 512;  // + one producer warpgroup
constexpr int kPlane = 55 * 55;
// A (tile, channel) stage's window: 21 rows of 228 columns, 9600 bytes in 16 bits;
// consecutive stages start 6368 bytes apart (the distinct input bytes per stage).
__host__ __device__ constexpr int stage_copy_bytes(int elem_bytes) { return 4800 * elem_bytes; }
__host__ __device__ constexpr int stage_stride(int elem_bytes) { return 3184 * elem_bytes; }
constexpr int64_t input_bytes(int elem_bytes) {
  return int64_t(kTiles) * 3 * stage_stride(elem_bytes) + stage_copy_bytes(elem_bytes);
}
constexpr int64_t kFloat32OutputBytes = int64_t(kTiles) * kTilePixels * 96 * 4;

// A tile's K steps over its three channel stages: 8, 8, 7 for K = 368; 8 each for 384; 9
// each for 432.
__host__ __device__ constexpr int steps_in_stage(int steps, int c) { return (steps + 2 - c) / 3; }

// Nonzero fp16 test values (value_at) in global memory: inputs, packed weights.
__global__ void fill(__half* p, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    p[i] = value_at(uint32_t(i));
}

// Finite fp16 (and bf16) operands in [0.5, 1) for B and the ring's slots (what the variants
// without copies or producers read), `bytes` of shared memory from `smem`, 16 bytes at a
// time by the whole CTA: a prologue far cheaper than any real kernel's.
__device__ __forceinline__ void fill_operands(uint8_t* smem, int bytes, int tid, int threads) {
  for (int i = tid; i < bytes / 16; i += threads) {
    const uint32_t v = 0x38003800u | ((uint32_t(i) * 0x00070003u) & 0x03FF03FFu);
    reinterpret_cast<uint4*>(smem)[i] = make_uint4(v, v ^ 0x00010001u, v ^ 0x00020002u, v ^ 0x00030003u);
  }
}

// Output pixel `pixel`'s offset in the NCHW output (channel 0), -1 past the batch.
__device__ __forceinline__ int64_t nchw_offset(int64_t pixel) {
  return pixel < kPixels ? (pixel / kPlane) * 96 * kPlane + pixel % kPlane : -1;
}

// The shipped float32 epilogue (op/cuda/common/epilogue.cuh): straight from the accumulators,
// lanes t and t ^ 2 swapping halves, to the real NCHW places of warpgroup `group`'s
// 64 pixels of `tile`. `gtid` is the thread's index in its warpgroup.
__device__ __forceinline__ void store_float32(const float (&acc)[12][4], void* out, int tile, int group,
                                              int gtid) {
  const int warp = gtid / 32, lane = gtid % 32;
  alexconv::cuda::Problem p;
  p.output = out;
  p.out_stride[1] = kPlane;
  int64_t rows[1][2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    rows[0][h] = nchw_offset(int64_t(tile) * kTilePixels + group * 64 + warp * 16 + h * 8 + lane / 4);
  }
  alexconv::cuda::store_tile(reinterpret_cast<const float(&)[1][12][4]>(acc), rows, p, lane % 4, false);
}

struct Timing {
  float warm_ms, cold_ms;
};

// Medians of `reps` timed launches, alternating: back to back, and after a write of
// `flush` (256 MB: the L2 holds nothing of the input, as do_bench's flush). Ten
// untimed launches first, but for fewer than ten reps (a sanitizer run).
template <class Launch>
int time_launches(Launch launch, uint8_t* flush, size_t flush_bytes, int reps, Timing& t) {
  reps = reps < 2 ? 2 : reps;  // one of each kind at least
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> warm, cold;
  const int untimed = reps < 10 ? 0 : 10;
  for (int rep = 0; rep < reps + untimed; ++rep) {
    const bool flush_first = rep % 2 == 1;
    if (flush_first) CHECK(cudaMemsetAsync(flush, rep & 0xFF, flush_bytes));
    CHECK(cudaEventRecord(e0));
    launch();
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (rep >= untimed) (flush_first ? cold : warm).push_back(ms);
  }
  std::sort(warm.begin(), warm.end());
  std::sort(cold.begin(), cold.end());
  t = {warm[warm.size() / 2], cold[cold.size() / 2]};
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  return 0;
}

}  // namespace skeleton
