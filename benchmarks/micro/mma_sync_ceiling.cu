// How fast can the portable kernels' mma.sync run on this GPU, alone and in the shape of the
// portable space-to-depth kernel's consumer loop? A microbenchmark for the portable issue's
// targets (perf-notes, "The portable space-to-depth kernel"): it times m16n8k16 fp16 MMAs with
// float32 accumulators
//   - from registers, 8 independent accumulators a warp, 4-16 warps per SM: the instruction's
//     own rate;
//   - in s2d_mma_sync's loop (consumers_sm80.cuh): per tap, one ldmatrix.x4 of A per m-tile
//     (16 consecutive 16-byte records per plane, shifted by dy * wv + dx), one of B per two
//     n-tiles, then kMT x kNT MMAs -- with nothing else (no producers, ring, epilogue): the
//     fits Halves (6 warps x 2 m-tiles x 6 n-tiles), Halves with its taps split over 12 warps,
//     Whole (12 x 1 x 12), and the bf16x3 shapes of the float32-accurate fits (A and B hi and
//     lo, three MMAs a product: hi hi, hi lo, lo hi): Halves', and Thirds' with one, two or
//     three of its teams multiplying at once.
// Each row reports the MMA rate, and the time the layer's MMAs would take at that rate on this
// GPU (224x224, batch 256: 69.3 GFLOP of fp16 MMAs in the space-to-depth layout, K 432 and 57
// virtual columns of 55; three times that for bf16x3) -- the floor of any kernel with that loop.
//
//   nvcc -std=c++17 -O3 -arch=sm_90a -I op benchmarks/micro/mma_sync_ceiling.cu -o build/mma_sync_ceiling
//   build/mma_sync_ceiling            (scripts/device/device_check.sh mma-ceiling)
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda/arch/mma_sync.cuh"
#include "cuda/arch/smem.cuh"  // smem_address
#include "micro_common.cuh"    // CHECK, value_at, hopper_device

namespace mma = alexconv::cuda::mma;
using alexconv::cuda::smem_address;

constexpr int kThreads = 512;
constexpr int kTaps = 27;                 // a tile's taps: 3 channels x 3 x 3
constexpr int kWv = 57;                   // the virtual width at 224
constexpr int kPlaneBytes = 512 * 16;     // a window plane: 512 records of 16 bytes
constexpr int kTapBlockBytes = 12 * 256;  // B of one tap, 96 channels (12 n-tiles of 8 x 16 fp16)
constexpr int kALoAt = 2 * kPlaneBytes;   // the lo planes (bf16x3 shape)
constexpr int kBAt = 4 * kPlaneBytes;
constexpr int kBLoAt = kBAt + kTaps * kTapBlockBytes;
constexpr int kSmemBytes = kBLoAt + kTaps * kTapBlockBytes;  // 198 KB: one CTA per SM
constexpr double kLayerGflop = 69.3;    // fp16 MMAs of the layer, space-to-depth layout
constexpr double kFlopsPerMma = 2.0 * 16 * 8 * 16;

// The instruction alone: 8 independent accumulators per warp, operands from registers.
__global__ void __launch_bounds__(kThreads, 1) registers_kernel(int warps, int iters, float* sink) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp >= warps) return;
  uint32_t a[4], b0 = 0x3c003c00u ^ lane, b1 = 0x3c003c00u + lane;
  for (int i = 0; i < 4; ++i) a[i] = 0x3c003c00u + uint32_t(i * 97 + lane);
  float acc[8][4] = {};
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int c = 0; c < 8; ++c) mma::f16_16816(acc[c], a, b0, b1);
  }
  float s = 0.f;
  for (int c = 0; c < 8; ++c) s += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
  sink[blockIdx.x * kThreads + threadIdx.x] = s;
}

// The consumer loop of consumers_sm80.cuh (multiply_taps), kTapsPerWarp taps a tile, over
// `tiles` tiles, on the first `warps` warps. kProducts 3: the bf16x3 shape (hi and lo of A and
// B loaded, three MMAs per product; fp16 numbers, bf16's rate is the same).
template <int kMT, int kNT, int kProducts>
__global__ void __launch_bounds__(kThreads, 1) loop_kernel(int warps, int taps_per_warp, int tiles, float* sink) {
  extern __shared__ __align__(16) unsigned char smem[];
  for (int i = threadIdx.x; i < kSmemBytes / 2; i += kThreads) {
    reinterpret_cast<__half*>(smem)[i] = value_at(uint32_t(i) + blockIdx.x);
  }
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp >= warps) return;
  const int pixel_warp = warp % (12 / kMT);  // warps past a tile's (K split, Thirds' later teams) repeat its pixels
  const uint32_t base = smem_address(smem);
  const uint32_t a_lane = base + uint32_t(lane >> 4) * kPlaneBytes + uint32_t(16 * kMT * pixel_warp + (lane & 15)) * 16;
  const uint32_t b_lane = base + kBAt + uint32_t(lane) * 16;
  float acc[kMT][kNT][4] = {};
  for (int t = 0; t < tiles; ++t) {
#pragma unroll 1
    for (int tap0 = 0; tap0 < taps_per_warp; tap0 += 9) {
#pragma unroll
      for (int s = 0; s < 9; ++s) {
        const int tap = tap0 + s;
        if (tap >= taps_per_warp) break;
        const uint32_t shift = uint32_t((s / 3) * kWv + s % 3) * 16;
        uint32_t a[kProducts > 1 ? 2 : 1][kMT][4];
#pragma unroll
        for (int h = 0; h < (kProducts > 1 ? 2 : 1); ++h) {
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) mma::ldmatrix_x4(a[h][mt], a_lane + h * kALoAt + shift + mt * 256);
        }
        const uint32_t b_tap = b_lane + uint32_t(tap % kTaps) * kTapBlockBytes;
#pragma unroll
        for (int pair = 0; pair < kNT / 2; ++pair) {
          uint32_t b[kProducts > 1 ? 2 : 1][4];
#pragma unroll
          for (int h = 0; h < (kProducts > 1 ? 2 : 1); ++h) {
            mma::ldmatrix_x4(b[h], b_tap + h * (kBLoAt - kBAt) + pair * 512);
          }
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
            for (int p = 0; p < kProducts; ++p) {  // hi hi, hi lo, lo hi
              const int ha = p == 2 ? 1 : 0, hb = p == 1 ? 1 : 0;
              mma::f16_16816(acc[mt][2 * pair], a[ha][mt], b[hb][0], b[hb][1]);
              mma::f16_16816(acc[mt][2 * pair + 1], a[ha][mt], b[hb][2], b[hb][3]);
            }
          }
        }
      }
    }
  }
  float s = 0.f;
  for (int mt = 0; mt < kMT; ++mt) {
    for (int nt = 0; nt < kNT; ++nt) s += acc[mt][nt][0] + acc[mt][nt][1] + acc[mt][nt][2] + acc[mt][nt][3];
  }
  sink[blockIdx.x * kThreads + threadIdx.x] = s;
}

struct Row {
  const char* name;
  int warps, taps_per_warp, mmas_per_tap_per_warp, products;
  void (*launch)(int sms, int warps, int taps, int tiles, float* sink);
};

template <int kMT, int kNT, int kProducts>
void launch_loop(int sms, int warps, int taps, int tiles, float* sink) {
  loop_kernel<kMT, kNT, kProducts><<<sms, kThreads, kSmemBytes>>>(warps, taps, tiles, sink);
}

// Median of 5 timed launches after one warm-up, in ms.
template <class F>
float median_ms(F&& launch) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  launch();
  std::vector<float> ms;
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(start);
    launch();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float t = 0.f;
    cudaEventElapsedTime(&t, start, stop);
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int main() {
  int sms = 0;
  cudaDeviceProp prop;
  if (hopper_device(sms, prop) != 0) return 1;
  float* sink = nullptr;
  CHECK(cudaMalloc(&sink, size_t(sms) * kThreads * sizeof(float)));
  std::printf("mma.sync m16n8k16 fp16 -> f32 on %s (%d SMs); layer: %.1f GFLOP of fp16 MMAs (x3 for bf16x3)\n\n",
              prop.name, sms, kLayerGflop);
  std::printf("| loop | warps/SM | MMAs/SM | ms | MMA TFLOP/s | the layer's MMAs at this rate (ms) |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (int warps : {4, 8, 12, 16}) {
    constexpr int kIters = 20000;
    const float ms = median_ms([&] { registers_kernel<<<sms, kThreads>>>(warps, kIters, sink); });
    CHECK(cudaGetLastError());
    const double mmas = double(warps) * kIters * 8;
    const double tflops = mmas * sms * kFlopsPerMma / (ms * 1e9);
    std::printf("| registers, 8 chains a warp | %d | %.0f | %.3f | %.0f | %.3f |\n", warps, mmas, ms, tflops,
                kLayerGflop / tflops);
  }
  const Row rows[] = {
      {"Halves: 6 warps x 2 m-tiles x 6 n-tiles", 6, kTaps, 12, 1, launch_loop<2, 6, 1>},
      {"Halves, taps split over 12 warps", 12, 14, 12, 1, launch_loop<2, 6, 1>},
      {"Whole: 12 warps x 1 m-tile x 12 n-tiles", 12, kTaps, 12, 1, launch_loop<1, 12, 1>},
      {"bf16x3 shape: 6 warps x 2 x 6, hi and lo, 3 MMAs a product", 6, kTaps, 36, 3, launch_loop<2, 6, 3>},
      // Thirds (the 99 KB float32-accurate fit): a team of 4 warps x 3 m-tiles x 4 n-tiles; its
      // teams take tiles in turn, so one multiplies at a time, two where a third slot would let them.
      {"Thirds: one team, 4 warps x 3 x 4, bf16x3", 4, kTaps, 36, 3, launch_loop<3, 4, 3>},
      {"Thirds: two teams at once, 8 warps x 3 x 4, bf16x3", 8, kTaps, 36, 3, launch_loop<3, 4, 3>},
      {"Thirds: three teams at once, 12 warps x 3 x 4, bf16x3", 12, kTaps, 36, 3, launch_loop<3, 4, 3>},
  };
  CHECK(cudaFuncSetAttribute(loop_kernel<2, 6, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  CHECK(cudaFuncSetAttribute(loop_kernel<1, 12, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  CHECK(cudaFuncSetAttribute(loop_kernel<2, 6, 3>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  CHECK(cudaFuncSetAttribute(loop_kernel<3, 4, 3>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  for (const Row& r : rows) {
    constexpr int kTiles = 400;
    const float ms = median_ms([&] { r.launch(sms, r.warps, r.taps_per_warp, kTiles, sink); });
    CHECK(cudaGetLastError());
    const double mmas = double(r.warps) * r.taps_per_warp * r.mmas_per_tap_per_warp * kTiles;
    const double tflops = mmas * sms * kFlopsPerMma / (ms * 1e9);
    std::printf("| %s | %d | %.0f | %.3f | %.0f | %.3f |\n", r.name, r.warps, mmas, ms, tflops,
                kLayerGflop * r.products / tflops);
  }
  CHECK(cudaFree(sink));
  return 0;
}
