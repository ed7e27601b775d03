// Element loads for staging windows through registers: a load that yields 0 where
// `inside` is false (padding, past the image), without a branch or a select that
// would wait on the load, so that all of a stage's loads stay in flight together.
// The input is read-only for the kernel's lifetime (.nc).
#pragma once

#include <cstdint>

namespace alexconv {
namespace cuda {

__device__ __forceinline__ uint16_t load_or_zero(const uint16_t* ptr, bool inside) {
  uint16_t v;
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\nmov.b16 %0, 0;\n"
      "@p ld.global.nc.b16 %0, [%1];\n}\n"
      : "=h"(v)
      : "l"(ptr), "r"(int(inside)));
  return v;
}

__device__ __forceinline__ float load_or_zero(const float* ptr, bool inside) {
  float v;
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\nmov.b32 %0, 0;\n"
      "@p ld.global.nc.f32 %0, [%1];\n}\n"
      : "=f"(v)
      : "l"(ptr), "r"(int(inside)));
  return v;
}

// Two 16-bit elements as one word (the lower address in the low half), 4-byte aligned.
__device__ __forceinline__ uint32_t load_or_zero2(const uint16_t* ptr, bool inside) {
  uint32_t v;
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\nmov.b32 %0, 0;\n"
      "@p ld.global.nc.b32 %0, [%1];\n}\n"
      : "=r"(v)
      : "l"(ptr), "r"(int(inside)));
  return v;
}

// Two float32 elements, 8-byte aligned.
__device__ __forceinline__ float2 load_or_zero2(const float* ptr, bool inside) {
  float2 v;
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %3, 0;\nmov.b32 %0, 0;\nmov.b32 %1, 0;\n"
      "@p ld.global.nc.v2.f32 {%0, %1}, [%2];\n}\n"
      : "=f"(v.x), "=f"(v.y)
      : "l"(ptr), "r"(int(inside)));
  return v;
}

// Four float32 elements, 16-byte aligned.
__device__ __forceinline__ float4 load_or_zero4(const float* ptr, bool inside) {
  float4 v;
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %5, 0;\nmov.b32 %0, 0;\nmov.b32 %1, 0;\nmov.b32 %2, 0;\n"
      "mov.b32 %3, 0;\n@p ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];\n}\n"
      : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
      : "l"(ptr), "r"(int(inside)));
  return v;
}

}  // namespace cuda
}  // namespace alexconv
