// CUDA backend (TORCH_LIBRARY_IMPL CUDA): argument checks, output allocation, device
// guard and stream, then the launch plan dispatch.cpp picks, launched as planned.
#include <ATen/Context.h>
#include <ATen/Functions.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <string>

#include "../compat.h"
#include "../conv1_checks.h"
#include "../conv1_geometry.h"
#include "dispatch.h"
#include "kernel_api.h"
#include "launch_plan.h"

namespace alexconv {
namespace {

cuda::DType to_kernel_dtype(at::ScalarType t) {
  if (t == at::kHalf) return cuda::DType::kFloat16;
  if (t == at::kBFloat16) return cuda::DType::kBFloat16;
  TORCH_CHECK(t == at::kFloat, "alexconv::conv1: unsupported dtype ", t);  // checked earlier
  return cuda::DType::kFloat32;
}

// Calls none of our kernels can run (GPUs below sm_80, extents past the kernels' 32-bit
// tile arithmetic, geometry outside cuda::kernels_cover): ATen's convolution, as nn.Conv2d
// reaches it (cuDNN where it applies, with the same benchmark and deterministic flags, else
// ATen's own kernels), but with TF32 by the op's own contract rather than the global flag,
// and in the output memory format the op promises; relu as a second pass, in place
// (at::relu_'s rule, which the kernels' fused epilogues follow). ATen allocates the output
// (and cuDNN its workspace), all the call holds, as for nn.Conv2d (issue 66): the caller holds
// no output of its own for this path.
at::Tensor conv1_aten(const at::Tensor& input, const at::Tensor& weight,
                      const c10::optional<at::Tensor>& bias, bool allow_tf32, int64_t pad, bool relu) {
  const int64_t stride = kStride, dilation = 1;
  const at::Context& ctx = at::globalContext();
  at::Tensor y = at::_convolution(input, weight, bias, {stride, stride}, {pad, pad}, {dilation, dilation},
                                  /*transposed=*/false, /*output_padding=*/{0, 0}, /*groups=*/1,
                                  ctx.benchmarkCuDNN(), ctx.deterministicCuDNN() || ctx.deterministicAlgorithms(),
                                  ctx.userEnabledCuDNN(), allow_tf32);
  y = conv1_in_output_format(y, input, weight);
  return relu ? y.relu_() : y;
}

void copy_strides(const at::Tensor& t, int64_t (&dst)[4]) {
  for (int i = 0; i < 4; ++i) dst[i] = t.stride(i);
}

// The kernels' view of a call whose output is `out`.
cuda::Problem make_problem(const at::Tensor& input, const at::Tensor& weight,
                           const c10::optional<at::Tensor>& bias, bool allow_tf32, int64_t padding,
                           bool relu, const at::Tensor& out) {
  cuda::Problem p;
  p.input = compat::const_data_ptr(input);
  p.weight = compat::const_data_ptr(weight);
  const bool has_bias = bias.has_value() && bias->defined();
  p.bias = has_bias ? compat::const_data_ptr(*bias) : nullptr;
  p.bias_stride = has_bias ? bias->stride(0) : 0;
  p.output = compat::mutable_data_ptr(out);
  p.dtype = to_kernel_dtype(input.scalar_type());
  p.allow_tf32 = allow_tf32;
  p.relu = relu;
  p.out_channels = weight.size(0);
  p.pad = padding;
  p.batch = input.size(0);
  p.in_h = input.size(2);
  p.in_w = input.size(3);
  p.out_h = out.size(2);
  p.out_w = out.size(3);
  copy_strides(input, p.in_stride);
  copy_strides(weight, p.weight_stride);
  copy_strides(out, p.out_stride);
  p.out_pixel_major = cuda::pixel_major_output(p);
  return p;
}

// The device as the dispatcher plans for it (the current device; the caller holds the guard).
// ATen's convolution runs any call (cuDNN, else its own kernels).
cuda::DeviceInfo current_device() {
  return cuda::device_info(*at::cuda::getCurrentDeviceProperties(), /*aten_available=*/true);
}

at::Tensor conv1_cuda(const at::Tensor& input, const at::Tensor& weight,
                      const c10::optional<at::Tensor>& bias, bool allow_tf32, int64_t padding,
                      bool relu) {
  check_conv1_args(input, weight, bias, padding);
  const c10::cuda::CUDAGuard guard(input.device());
  // The output is empty exactly where the batch is (the checks leave every other extent >= 1).
  if (input.size(0) == 0) return conv1_empty_output(input, weight, padding);
  // Our kernel where one is built for the call's geometry and can run it (relu in its
  // epilogue), else ATen's, which allocates its own output: ours is allocated only where
  // one of our kernels may run.
  if (!cuda::kernels_cover(weight.size(0), padding)) {
    return conv1_aten(input, weight, bias, allow_tf32, padding, relu);
  }
  at::Tensor out = conv1_empty_output(input, weight, padding);
  const cuda::LaunchPlan plan =
      cuda::plan_call(make_problem(input, weight, bias, allow_tf32, padding, relu, out), current_device());
  if (plan.kernel == cuda::Kernel::kAten) {
    // The plan read `out`'s strides and alignment; unwritten, it goes back to the caching
    // allocator before ATen allocates its own output (the same block), so the call holds one.
    out.reset();
    return conv1_aten(input, weight, bias, allow_tf32, padding, relu);
  }
  C10_CUDA_CHECK(cuda::launch(plan, at::cuda::getCurrentCUDAStream()));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

std::string conv1_kernel_cuda(const at::Tensor& input, const at::Tensor& weight,
                              const c10::optional<at::Tensor>& bias, bool allow_tf32, int64_t padding,
                              bool relu) {
  check_conv1_args(input, weight, bias, padding);
  const c10::cuda::CUDAGuard guard(input.device());
  const at::Tensor out = conv1_empty_output(input, weight, padding);
  if (out.numel() == 0) return "none";  // an empty output launches nothing
  if (!cuda::kernels_cover(weight.size(0), padding)) return "aten";
  return cuda::kernel_name(
      cuda::plan_call(make_problem(input, weight, bias, allow_tf32, padding, relu, out), current_device()).kernel);
}

}  // namespace
}  // namespace alexconv

TORCH_LIBRARY_IMPL(alexconv, CUDA, m) {
  m.impl("conv1", &alexconv::conv1_cuda);
  m.impl("conv1_kernel", &alexconv::conv1_kernel_cuda);
}
