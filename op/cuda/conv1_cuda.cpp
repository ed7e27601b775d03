// CUDA backend: argument checks, output allocation, device guard and stream,
// then one launch of the kernels in this folder.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdlib>
#include <string>

#include "../conv1_checks.h"
#include "conv1_launch.h"

namespace alexconv {
namespace {

cuda::DType to_kernel_dtype(at::ScalarType t) {
  if (t == at::kHalf) return cuda::DType::kFloat16;
  if (t == at::kBFloat16) return cuda::DType::kBFloat16;
  TORCH_CHECK(t == at::kFloat, "alexconv::conv1: unsupported dtype ", t);  // checked earlier
  return cuda::DType::kFloat32;
}

// ALEXCONV_CUDA_KERNEL forces one kernel path, for tests of the paths a GPU or a
// problem size would not pick: direct, mma_sync (implicit GEMM with warp MMAs),
// wgmma (Hopper warpgroup MMAs, A gathered in registers) or s2d (Hopper, both
// operands from shared memory). Unset or "auto": the fastest for the GPU and size.
enum class KernelChoice { kAuto, kDirect, kMmaSync, kWgmma, kS2d };

KernelChoice kernel_choice() {
  static const KernelChoice choice = [] {
    const char* env = std::getenv("ALEXCONV_CUDA_KERNEL");
    const std::string v = env ? env : "auto";
    if (v == "auto") return KernelChoice::kAuto;
    if (v == "direct") return KernelChoice::kDirect;
    if (v == "mma_sync") return KernelChoice::kMmaSync;
    if (v == "wgmma") return KernelChoice::kWgmma;
    if (v == "s2d") return KernelChoice::kS2d;
    TORCH_CHECK(false, "ALEXCONV_CUDA_KERNEL must be auto, direct, mma_sync, wgmma or s2d, got '", v,
                "'");
    return KernelChoice::kAuto;
  }();
  return choice;
}

cudaError_t launch(const cuda::Problem& p, cuda::DeviceInfo device, cudaStream_t stream) {
  const KernelChoice choice = kernel_choice();
  if (choice == KernelChoice::kDirect) return cuda::launch_conv1_direct(p, stream);
  if (choice == KernelChoice::kAuto) {
    // The fastest path that can run the call (docs/perf-notes.md): the space-to-depth
    // kernel where measured faster, else the register-gather implicit GEMM where its
    // working set fits in shared memory, else the direct kernel.
    if (cuda::s2d_preferred(p, device)) return cuda::launch_conv1_s2d(p, device, stream);
    return cuda::igemm_supported(p, device) ? cuda::launch_conv1_igemm(p, device, stream)
                                            : cuda::launch_conv1_direct(p, stream);
  }
  if (choice == KernelChoice::kS2d) {
    TORCH_CHECK(cuda::s2d_supported(p, device), "ALEXCONV_CUDA_KERNEL=s2d asks for a kernel this GPU (sm_",
                device.major, device.minor, ") or build cannot run");
    return cuda::launch_conv1_s2d(p, device, stream);
  }
  device.allow_wgmma = choice == KernelChoice::kWgmma;
  TORCH_CHECK(cuda::igemm_supported(p, device) &&
                  (choice == KernelChoice::kMmaSync || cuda::wgmma_available(device)),
              "ALEXCONV_CUDA_KERNEL=", choice == KernelChoice::kWgmma ? "wgmma" : "mma_sync",
              " asks for a kernel this GPU (sm_", device.major, device.minor, ") or build cannot run");
  return cuda::launch_conv1_igemm(p, device, stream);
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

  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  cuda::DeviceInfo device;
  device.sm_count = prop->multiProcessorCount;
  device.major = prop->major;
  device.minor = prop->minor;
  device.max_smem_per_block_optin = prop->sharedMemPerBlockOptin;

  C10_CUDA_CHECK(launch(p, device, at::cuda::getCurrentCUDAStream()));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace
}  // namespace alexconv

TORCH_LIBRARY_IMPL(alexconv, CUDA, m) {
  m.impl("conv1", &alexconv::conv1_cuda);
}
