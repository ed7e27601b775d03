// Which kernel runs a call: the whole policy in one place (dispatch.cpp), so that
// "which kernel runs for my call?" has one answer. docs/architecture.md has the table.
#pragma once

#include <cuda_runtime_api.h>

#include "kernel_api.h"

namespace alexconv {
namespace cuda {

// The paths a call can take. kMmaSync and kWgmma are the register-gather implicit
// GEMM's two engines (igemm/), kS2d the space-to-depth implicit GEMM (s2d/), kDirect
// the plain kernel (direct/).
enum class Kernel { kDirect, kMmaSync, kWgmma, kS2d };
const char* kernel_name(Kernel kernel);

// The properties of the device the call runs on, as the kernels plan with them.
DeviceInfo device_info(const cudaDeviceProp& prop);

// The kernel for this call: the one ALEXCONV_CUDA_KERNEL forces (raising a clear error
// where this GPU or build cannot run it), else the fastest that can run it here.
Kernel choose_kernel(const Problem& problem, const DeviceInfo& device);

// Enqueues `kernel` on `stream`; errors of its set-up calls are returned, the launch
// itself is checked by the caller (C10_CUDA_KERNEL_LAUNCH_CHECK).
cudaError_t launch(Kernel kernel, const Problem& problem, DeviceInfo device, cudaStream_t stream);

}  // namespace cuda
}  // namespace alexconv
