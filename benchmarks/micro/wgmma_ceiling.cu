// How fast can the implicit-GEMM kernels' own wgmma instruction run, and what does
// the other memory traffic of an SM cost it? A microbenchmark for the perf notes'
// "where it stands": it times m64n96k16 fp16 wgmmas (the space-to-depth kernel's SS
// form, both operands in shared memory, and the register-gather kernel's RS form, A
// in registers) on 1-3 consumer warpgroups per SM, alone or beside a warpgroup that
// issues one kind of the kernels' other traffic as fast as it can (or with a gap of
// dependent FMAs after each access): 16-byte shared loads (producers reading boxes),
// 4-byte shared loads (the A gather), 16-byte shared stores (producers writing
// records), 4-byte global stores in two 64-byte runs (the float32 epilogue) and
// shuffles (its swap), against a control that runs the gap's FMAs alone. It
// reports cycles per wgmma per SM against the 48 of the tensor peak (2048 fp16 FMA per
// cycle and SM) and the traffic's bytes per cycle.
//
//   nvcc -std=c++17 -O3 -arch=sm_90a -I op benchmarks/micro/wgmma_ceiling.cu -o build/wgmma_ceiling
//   build/wgmma_ceiling            (scripts/device/device_check.sh ceiling)
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda/arch/smem.cuh"  // smem_address
#include "cuda/arch/wgmma.cuh"
#include "micro_common.cuh"  // CHECK, value_at, hopper_device

namespace wg = alexconv::cuda::wgmma;
using alexconv::cuda::smem_address;

constexpr int kSteps = 27;                  // a space-to-depth tile's K steps (K = 432)
constexpr int kABlockBytes = 64 * 32;       // 64 rows x 16 K of fp16
constexpr int kASteps = 9;                  // A blocks per warpgroup, cycled
constexpr int kBBytes = kSteps * wg::kBlockBytes;
constexpr int kABytes = 3 * kASteps * kABlockBytes;
constexpr int kSmemBytes = kBBytes + kABytes;
constexpr int kFlops = 2 * 64 * 96 * 16;    // per wgmma
constexpr double kPeakCycles = 64.0 * 96 * 16 / 2048;  // 48 cycles per wgmma per SM
constexpr int kMmaIters = 2000;             // tiles per MMA warpgroup
constexpr int kTrafficAloneIters = 20000;   // bursts of 16 accesses, when no MMA runs
constexpr int kGlobalFloats = 1 << 16;      // per CTA: 256 KB, all CTAs' within L2

enum class Form { kSS, kRS };
enum class Traffic { kNone, kLds128, kLds32, kSts128, kStg32, kShfl, kFmaOnly };
constexpr const char* traffic_name(Traffic t) {
  return t == Traffic::kLds128  ? "16-byte shared loads"
         : t == Traffic::kLds32 ? "4-byte shared loads"
         : t == Traffic::kSts128 ? "16-byte shared stores"
         : t == Traffic::kStg32 ? "4-byte global stores"
         : t == Traffic::kShfl  ? "4-byte shuffles"
         : t == Traffic::kFmaOnly ? "the gap's FMAs only"
                                : "-";
}

struct Result {
  long long mma_cycles;      // the MMA warpgroups' loop, per CTA
  long long traffic_cycles;  // the traffic warpgroup's loop
  unsigned long long bytes;  // what it moved
  float sink;
};

template <Form kForm, int kWarpgroups>
__device__ void multiply(uint8_t* smem, int warpgroup, int tid, Result* out) {
  float acc[12][4];
#pragma unroll
  for (int i = 0; i < 12; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
  uint32_t a[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const __half2 v = __halves2half2(value_at(tid * 8 + 2 * j), value_at(tid * 8 + 2 * j + 1));
    a[j] = *reinterpret_cast<const uint32_t*>(&v);
  }
  const wg::Operand b = wg::blocks(smem_address(smem));
  const wg::Operand a_desc = wg::Operand::at_address(
      smem_address(smem + kBBytes + warpgroup * kASteps * kABlockBytes), wg::kLeadingBytes,
      wg::kStrideBytes);
  const long long start = clock64();
  wg::fence();
#pragma unroll 1
  for (int it = 0; it < kMmaIters; ++it) {
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const uint64_t b_desc = b.at(s * wg::kBlockUnits);
      if constexpr (kForm == Form::kSS) {
        wg::f16_m64n96k16_ss(acc, a_desc.at((s % kASteps) * (kABlockBytes / 16)), b_desc);
      } else {
        wg::f16_m64n96k16(acc, a, b_desc);
      }
      if (s % 3 == 2) {  // as the kernels do: a group per 3 wgmmas, one left in flight
        wg::commit();
        wg::wait<1>();
      }
    }
  }
  wg::wait<0>();
  wg::fence_accumulators(acc);
  asm volatile("bar.sync 1, %0;\n" ::"r"(kWarpgroups * 128));
  if (tid == 0) out[blockIdx.x].mma_cycles = clock64() - start;
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < 12; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) sum += acc[i][j];
  if (sum == 12345.f) out[blockIdx.x].sink = sum;  // keeps the MMAs alive
}

// One access of the traffic warpgroup's lane `lane`, round r; returns its bytes.
template <Traffic kTraffic>
__device__ __forceinline__ int access(uint32_t smem_base, float* global, int lane, int r,
                                      uint32_t& x) {
  // 16-byte units: consecutive lanes, consecutive units (conflict-free), the 128
  // threads sweeping all of shared memory; 4-byte words likewise.
  const uint32_t unit = (uint32_t(r) * 128 + lane) % (kSmemBytes / 16);
  if constexpr (kTraffic == Traffic::kLds128) {
    uint32_t v0, v1, v2, v3;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3)
                 : "r"(smem_base + unit * 16));
    x ^= v0 ^ v1 ^ v2 ^ v3;
    return 16;
  } else if constexpr (kTraffic == Traffic::kLds32) {
    uint32_t v;
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(smem_base + unit * 4));
    x ^= v;
    return 4;
  } else if constexpr (kTraffic == Traffic::kSts128) {
    // Past the operands' bytes would be out of bounds: stores land over the A blocks
    // (their values do not matter to the timing; every value stays a finite fp16).
    const uint32_t at = kBBytes + (unit % (kABytes / 16)) * 16;
    asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(smem_base + at),
                 "r"(0x3C003C00u ^ (x & 0x00FF00FFu)));
    return 16;
  } else if constexpr (kTraffic == Traffic::kShfl) {
    x = __shfl_xor_sync(0xffffffffu, x + uint32_t(r), 1);
    return 4;
  } else if constexpr (kTraffic == Traffic::kFmaOnly) {
    return 0;
  } else {
    // The float32 epilogue's pattern: lanes 0-15 and 16-31 write 16 consecutive floats
    // of two channels (two 64-byte runs in different lines).
    const int g = lane % 32, channel = (lane / 32) * 2 + g / 16;
    const uint32_t at = (uint32_t(r) * 16 + (g % 16) + channel * 4096u) % kGlobalFloats;
    global[at] = __uint_as_float(0x3F800000u | (x & 0xFF));
    return 4;
  }
}

// Issues kTraffic until the MMAs are done (or a fixed count when there are none),
// each access followed by `gap` dependent FMAs.
template <Traffic kTraffic, int kWarpgroups>
__device__ void generate(uint8_t* smem, float* global, volatile int* done, int gap, int lane,
                         Result* out) {
  const uint32_t base = smem_address(smem);
  float* mine = global + size_t(blockIdx.x) * kGlobalFloats;
  uint32_t x = lane;
  float f = 1.f + lane;
  unsigned long long bytes = 0;
  int r = 0;
  const long long start = clock64();
#pragma unroll 1
  for (int burst = 0; kWarpgroups > 0 ? !*done : burst < kTrafficAloneIters; ++burst) {
#pragma unroll
    for (int i = 0; i < 16; ++i, ++r) {
      bytes += access<kTraffic>(base, mine, lane, r, x);
#pragma unroll 1
      for (int k = 0; k < gap; ++k) f = fmaf(f, 1.0001f, 0.5f);
    }
  }
  const long long cycles = clock64() - start;
  if (lane == 0) out[blockIdx.x].traffic_cycles = cycles;
  atomicAdd(&out[blockIdx.x].bytes, bytes);
  if (x == 0x12345u || f == 0.f) out[blockIdx.x].sink = f;
}

template <Form kForm, int kWarpgroups, Traffic kTraffic>
__global__ void __launch_bounds__(512, 1) ceiling_kernel(int gap, float* global, Result* out) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ volatile int done;
  // The role read from lane 0: ptxas then knows it warp-uniform and does not serialise
  // the wgmmas for a divergent path (C7520).
  const int tid = threadIdx.x, warpgroup = __shfl_sync(0xffffffffu, tid / 128, 0);
  __half* h = reinterpret_cast<__half*>(smem);
  for (int i = tid; i < kSmemBytes / 2; i += blockDim.x) h[i] = value_at(i + blockIdx.x * 7919u);
  if (tid == 0) done = 0;
  __syncthreads();
  if (warpgroup < kWarpgroups) {
    multiply<kForm, kWarpgroups>(smem, warpgroup, tid, out);
    if (tid == 0) done = 1;
  } else if constexpr (kTraffic != Traffic::kNone) {
    generate<kTraffic, kWarpgroups>(smem, global, &done, gap, tid - kWarpgroups * 128, out);
  }
}

template <Form kForm, int kWarpgroups, Traffic kTraffic>
int measure(int sms, float* global, int gap = 0) {
  auto kernel = ceiling_kernel<kForm, kWarpgroups, kTraffic>;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  Result* d_out = nullptr;
  CHECK(cudaMalloc(&d_out, sms * sizeof(Result)));
  const int threads = (kWarpgroups + (kTraffic != Traffic::kNone ? 1 : 0)) * 128;
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  double best_ms = 1e30, mma_cycles = 0, traffic_cycles = 0, bytes = 0;
  std::vector<Result> host(sms);
  for (int rep = 0; rep < 5; ++rep) {  // the first is warm-up; then the fastest
    CHECK(cudaMemset(d_out, 0, sms * sizeof(Result)));
    CHECK(cudaEventRecord(e0));
    kernel<<<sms, threads, kSmemBytes>>>(gap, global, d_out);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (rep == 0 || ms >= best_ms) continue;
    best_ms = ms;
    CHECK(cudaMemcpy(host.data(), d_out, sms * sizeof(Result), cudaMemcpyDeviceToHost));
    mma_cycles = traffic_cycles = bytes = 0;
    for (const Result& r : host) {
      mma_cycles += double(r.mma_cycles) / sms;
      traffic_cycles += double(r.traffic_cycles) / sms;
      bytes += double(r.bytes) / sms;
    }
  }
  const double wgmmas = double(kWarpgroups) * kMmaIters * kSteps;  // per SM
  const char* form = kWarpgroups == 0 ? "-" : kForm == Form::kSS ? "SS" : "RS";
  std::printf("| %s | %d | %-21s | %3d |", form, kWarpgroups, traffic_name(kTraffic), gap);
  if constexpr (kWarpgroups > 0) {
    const double per_wgmma = mma_cycles / wgmmas;
    std::printf(" %6.1f | %5.1f%% | %6.1f |", per_wgmma, 100.0 * kPeakCycles / per_wgmma,
                wgmmas * sms * kFlops / (best_ms * 1e-3) / 1e12);
  } else {
    std::printf(" - | - | - |");
  }
  if constexpr (kTraffic != Traffic::kNone) {
    std::printf(" %6.1f |\n", bytes / traffic_cycles);
  } else {
    std::printf(" - |\n");
  }
  CHECK(cudaFree(d_out));
  return 0;
}

int main() {
  int sms = 0;
  cudaDeviceProp prop;
  if (hopper_device(sms, prop) != 0) return 1;
  float* global = nullptr;
  CHECK(cudaMalloc(&global, size_t(sms) * kGlobalFloats * sizeof(float)));
  std::printf("%s, %d SMs; m64n96k16 fp16 wgmmas, %d per tile, one CTA per SM; peak = %.0f "
              "cycles per wgmma per SM\n\n",
              prop.name, sms, kSteps, kPeakCycles);
  std::printf("| form | MMA warpgroups | other traffic | gap (FMAs) | cycles/wgmma/SM | of peak | "
              "TFLOP/s | traffic B/clk |\n|---|---|---|---|---|---|---|---|\n");
  using T = Traffic;
  int rc = 0;
  rc |= measure<Form::kSS, 1, T::kNone>(sms, global);
  rc |= measure<Form::kSS, 3, T::kNone>(sms, global);
  rc |= measure<Form::kRS, 1, T::kNone>(sms, global);
  rc |= measure<Form::kRS, 3, T::kNone>(sms, global);
  rc |= measure<Form::kSS, 0, T::kLds128>(sms, global);
  rc |= measure<Form::kSS, 0, T::kLds32>(sms, global);
  rc |= measure<Form::kSS, 0, T::kSts128>(sms, global);
  rc |= measure<Form::kSS, 0, T::kStg32>(sms, global);
  rc |= measure<Form::kSS, 0, T::kShfl>(sms, global);
  rc |= measure<Form::kSS, 3, T::kLds128>(sms, global);
  rc |= measure<Form::kSS, 3, T::kLds32>(sms, global);
  rc |= measure<Form::kSS, 3, T::kSts128>(sms, global);
  rc |= measure<Form::kSS, 3, T::kStg32>(sms, global);
  rc |= measure<Form::kRS, 3, T::kLds128>(sms, global);
  rc |= measure<Form::kRS, 3, T::kLds32>(sms, global);
  rc |= measure<Form::kRS, 3, T::kSts128>(sms, global);
  rc |= measure<Form::kRS, 3, T::kStg32>(sms, global);
  rc |= measure<Form::kSS, 3, T::kShfl>(sms, global);
  rc |= measure<Form::kRS, 3, T::kShfl>(sms, global);
  rc |= measure<Form::kSS, 3, T::kFmaOnly>(sms, global, 4);
  for (int gap : {4, 16, 64}) {
    rc |= measure<Form::kSS, 3, T::kLds128>(sms, global, gap);
    rc |= measure<Form::kRS, 3, T::kLds32>(sms, global, gap);
    rc |= measure<Form::kRS, 3, T::kStg32>(sms, global, gap);
  }
  CHECK(cudaFree(global));
  return rc;
}
