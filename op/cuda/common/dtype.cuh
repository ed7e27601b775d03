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

// The value an output element is stored as: from_float, then torch.relu of that value where
// the call fuses it (Problem::relu), bit for bit as torch.relu on a CUDA tensor of the output's
// dtype: NaN stays NaN (a select, never fmaxf, which would return 0 for NaN), and every other
// value not above zero becomes +0.0, -0.0 included (CUDA's relu is a max in float, and the
// GPU's max orders -0.0 below +0.0; CPU torch, and our CPU kernel, keep -0.0). relu after the
// convolution acts on the rounded value; applied to the float32 value before the rounding it
// gives the same bits, since rounding keeps the sign: v <= 0 (-0.0 and -inf included) rounds to a
// value relu would make +0.0, v > 0 to one it keeps, and NaN fails the compare either way. One
// compare and one select.
template <DType T>
__device__ __forceinline__ typename Storage<T>::type relu_output(float v, bool relu) {
  return from_float<T>(relu && v <= 0.f ? 0.f : v);
}

}  // namespace cuda
}  // namespace alexconv
