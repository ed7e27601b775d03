// The launch plan: everything a call's kernel launch needs, decided once. Each kernel family
// turns a (problem, device) into its plan -- or none where it cannot run the call -- and
// dispatch.cpp picks among those plans; the family's launch then runs the chosen plan as it
// is, deciding nothing again. conv1_kernel() and tests/cuda_harness read the same plans.
// Plain C++ and the CUDA runtime: the .cu files that implement the families include it too.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "catalog.h"
#include "common/launch_terms.h"
#include "common/tma_map.h"
#include "igemm/tile_plan.h"
#include "kernel_api.h"
#include "s2d/plan.h"

namespace alexconv {
namespace cuda {

struct LaunchPlan {
  Kernel kernel = Kernel::kAten;  // kAten: the caller runs ATen's convolution
  Problem problem;                // the call as it runs (dispatch may run TF32 accurate)
  OperandMode mode = OperandMode::kBf16x3;
  Fit fit = Fit::kWhole;
  Staging staging = Staging::kLoads;
  int units = 0;             // s2d families: load units per producer thread (6-8)
  bool pixel_major = false;  // s2d, 16-bit: the kernels that store channels-last outputs
  int64_t tiles = 0;         // CTA tiles (0: an empty call, nothing launched)
  size_t smem = 0;           // dynamic shared memory per CTA
  int sm_count = 0;          // the device's multiprocessors, which the persistent grids fill
  const char* rule = "";     // dispatch.cpp's rule that chose it (docs/perf-notes.md)
  // The family's own geometry: the register gather's tiles, the space-to-depth tiles, and the
  // input's TMA descriptor (staging kTma).
  igemm::TilePlan igemm;
  s2d::Plan s2d;
  WindowMap map{};
};

// A family's plan before its own decisions: the kernel, the call, the operand mode and the
// device's multiprocessors.
inline LaunchPlan plan_of_kernel(Kernel kernel, const Problem& problem, const DeviceInfo& device, OperandMode mode) {
  LaunchPlan plan;
  plan.kernel = kernel;
  plan.problem = problem;
  plan.mode = mode;
  plan.sm_count = device.sm_count;
  return plan;
}

// The families (direct/, igemm/, s2d/, s2d_mma_sync/): their plans, and the launch of a plan of theirs on
// `stream`. A launch returns errors of its set-up calls; the caller checks the launch itself
// (C10_CUDA_KERNEL_LAUNCH_CHECK).
LaunchPlan plan_direct(const Problem& problem);
cudaError_t launch_direct(const LaunchPlan& plan, cudaStream_t stream);

// The register-gather implicit GEMM in `fit` (Whole: 231,552 bytes of shared memory in float32
// modes, 153,984 in 16-bit ones; Halves: 157,056 / 98,688; Quarters, float32 only: 93,312) on
// the wgmma engine (Hopper, sm_90a builds, Whole only) or mma.sync (sm_80+).
std::optional<LaunchPlan> plan_igemm(const Problem& problem, const DeviceInfo& device, Fit fit, bool wgmma);
cudaError_t launch_igemm(const LaunchPlan& plan, cudaStream_t stream);
// Whether this build has wgmma code for the device (sm_90, built for sm_90a).
bool wgmma_available(const DeviceInfo& device);

// The space-to-depth implicit GEMM on Hopper (wgmma, TMA; sm_90a builds).
std::optional<LaunchPlan> plan_s2d(const Problem& problem, const DeviceInfo& device);
cudaError_t launch_s2d(const LaunchPlan& plan, cudaStream_t stream);

// The portable space-to-depth implicit GEMM (mma.sync, sm_80+), in the widest of its fits the
// device's shared memory takes: Whole (16-bit words, up to 158,208 bytes), Halves (16-bit words
// in 98,304, every sm_80+ GPU; bf16x3 in 157,440) or Thirds (bf16x3 in 101,120).
std::optional<LaunchPlan> plan_s2d_mma_sync(const Problem& problem, const DeviceInfo& device);
cudaError_t launch_s2d_mma_sync(const LaunchPlan& plan, cudaStream_t stream);

// The launch of any family's plan (not kAten's).
inline cudaError_t launch(const LaunchPlan& plan, cudaStream_t stream) {
  switch (plan.kernel) {
    case Kernel::kDirect: return launch_direct(plan, stream);
    case Kernel::kMmaSync:
    case Kernel::kMmaSyncN48:
    case Kernel::kMmaSyncN24:
    case Kernel::kWgmma: return launch_igemm(plan, stream);
    case Kernel::kS2d: return launch_s2d(plan, stream);
    case Kernel::kS2dMmaSync: return launch_s2d_mma_sync(plan, stream);
    case Kernel::kAten: break;  // not ours: the caller runs it
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace alexconv
