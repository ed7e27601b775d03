// What the microbenchmarks share: error checks that return from main's helpers, nonzero
// fp16 test values, and the Hopper device they need.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e = (call);                                                                  \
    if (e != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e)); \
      return 1;                                                                              \
    }                                                                                        \
  } while (0)

// Nonzero fp16 values in [-1, 1) from an index hash: the tensor cores multiply real data.
__device__ __forceinline__ __half value_at(uint32_t i) {
  i = (i ^ 61u) ^ (i >> 16);
  i *= 9u;
  i ^= i >> 4;
  i *= 0x27d4eb2du;
  i ^= i >> 15;
  return __float2half(float(i & 0xFFFF) / 32768.f - 1.f + 1.f / 65536.f);
}

// The current device's SM count and properties; 0 if it is an sm_90 GPU (which the
// wgmma code of these benchmarks needs), 1 after saying why not.
inline int hopper_device(int& sms, cudaDeviceProp& prop) {
  int device = 0;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CHECK(cudaGetDeviceProperties(&prop, device));
  if (prop.major != 9 || prop.minor != 0) {
    std::printf("needs an sm_90 GPU (found sm_%d%d)\n", prop.major, prop.minor);
    return 1;
  }
  return 0;
}
