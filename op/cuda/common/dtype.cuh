// Element access shared by the CUDA kernels: storage type per DType, and
// float conversion in both directions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace alexconv {
namespace cuda {

// Half types are carried as raw bits so the tensor-core path can move them
// without conversion.
template <DType T> struct Storage { using type = uint16_t; };
template <> struct Storage<DType::kFloat32> { using type = float; };

template <DType T>
__device__ __forceinline__ float to_float(typename Storage<T>::type v) {
  if constexpr (T == DType::kFloat32) {
    return v;
  } else if constexpr (T == DType::kFloat16) {
    return __half2float(__ushort_as_half(v));
  } else {
    return __bfloat162float(__ushort_as_bfloat16(v));
  }
}

template <DType T>
__device__ __forceinline__ typename Storage<T>::type from_float(float v) {
  if constexpr (T == DType::kFloat32) {
    return v;
  } else if constexpr (T == DType::kFloat16) {
    return __half_as_ushort(__float2half_rn(v));
  } else {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
}

}  // namespace cuda
}  // namespace alexconv
