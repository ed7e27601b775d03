// Which kernel runs a call: the whole policy in one place (dispatch.cpp), choosing among the
// families' launch plans, so that "which kernel runs for my call?" has one answer.
// docs/architecture.md has the table.
#pragma once

#include <cuda_runtime_api.h>

#include "catalog.h"  // Kernel, kernel_name, the GPU classes
#include "kernel_api.h"
#include "launch_plan.h"

namespace alexconv {
namespace cuda {

// The properties of the device the call runs on, as the kernels plan with them. Where
// ALEXCONV_EMULATE_DEVICE names another GPU class ("8.6", or "8.6:101376" with its
// shared-memory opt-in in bytes), the dispatcher plans as that GPU would: its compute
// capability and shared memory, this GPU's multiprocessors (tests and benchmarks of
// other GPUs' kernels on a Hopper card). `aten_available`: ATen can run calls none of ours
// can (the CUDA backend: always).
DeviceInfo device_info(const cudaDeviceProp& prop, bool aten_available);

// The plan for this call: the kernel ALEXCONV_CUDA_KERNEL forces (raising a clear error where
// this GPU or build cannot run it), else the fastest that can run it here, as its family
// planned it; a plan of kernel kAten where the caller runs ATen's convolution. Never kAten where
// one of ours can run the call; never kDirect where ATen can. Under auto a float32 allow_tf32
// call may run float32-accurate where that is measured faster (few output pixels per SM off
// Hopper; the result is then more exact than the TF32 contract asks): the plan's problem says.
// The plan is then launched as it is (launch_plan.h: launch).
LaunchPlan plan_call(const Problem& problem, const DeviceInfo& device);

// Whether our kernels (igemm/, s2d/, direct/) are built for this call's geometry: any padding
// of the op's (0-5; the register gather takes the even ones) and 1 to 96 output channels
// (torchvision's AlexNet has 64, KernelBench 96; the implicit GEMMs compute 96 against zero
// weights past the count and store those asked for; a CUDA 11.8 build multiples of 8 only,
// kAnyChannelCount). The op's wider calls (97-256 channels) take ATen's convolution, whatever
// ALEXCONV_CUDA_KERNEL says.
bool kernels_cover(int64_t out_channels, int64_t padding);

}  // namespace cuda
}  // namespace alexconv
