// CUDA backend (TORCH_LIBRARY_IMPL CUDA): argument checks, output allocation, device
// guard and stream, then the kernel dispatch.cpp picks.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "../conv1_checks.h"
#include "dispatch.h"
#include "kernel_api.h"

namespace alexconv {
namespace {

cuda::DType to_kernel_dtype(at::ScalarType t) {
  if (t == at::kHalf) return cuda::DType::kFloat16;
  if (t == at::kBFloat16) return cuda::DType::kBFloat16;
  TORCH_CHECK(t == at::kFloat, "alexconv::conv1: unsupported dtype ", t);  // checked earlier
  return cuda::DType::kFloat32;
}

void copy_strides(const at::Tensor& t, int64_t (&dst)[4]) {
  for (int i = 0; i < 4; ++i) dst[i] = t.stride(i);
}

at::Tensor conv1_cuda(const at::Tensor& input, const at::Tensor& weight,
                      const std::optional<at::Tensor>& bias, bool allow_tf32) {
  check_conv1_args(input, weight, bias);
  const c10::cuda::CUDAGuard guard(input.device());
  at::Tensor out = conv1_empty_output(input, weight);
  if (out.numel() == 0) return out;

  cuda::Problem p;
  p.input = input.const_data_ptr();
  p.weight = weight.const_data_ptr();
  const bool has_bias = bias.has_value() && bias->defined();
  p.bias = has_bias ? bias->const_data_ptr() : nullptr;
  p.bias_stride = has_bias ? bias->stride(0) : 0;
  p.output = out.mutable_data_ptr();
  p.dtype = to_kernel_dtype(input.scalar_type());
  p.allow_tf32 = allow_tf32;
  p.batch = input.size(0);
  p.in_h = input.size(2);
  p.in_w = input.size(3);
  p.out_h = out.size(2);
  p.out_w = out.size(3);
  copy_strides(input, p.in_stride);
  copy_strides(weight, p.weight_stride);
  copy_strides(out, p.out_stride);
  p.out_pixel_major = cuda::pixel_major_output(p);

  const cuda::DeviceInfo device = cuda::device_info(*at::cuda::getCurrentDeviceProperties());
  const cuda::Kernel kernel = cuda::choose_kernel(p, device);
  C10_CUDA_CHECK(cuda::launch(kernel, p, device, at::cuda::getCurrentCUDAStream()));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace
}  // namespace alexconv

TORCH_LIBRARY_IMPL(alexconv, CUDA, m) {
  m.impl("conv1", &alexconv::conv1_cuda);
}
