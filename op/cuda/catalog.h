// The kernel catalog: every path a CUDA call can take, by the name conv1_kernel() gives it, and
// the GPU classes the dispatcher plans for, with the shared memory a block can opt into on each.
// dispatch.cpp, ALEXCONV_EMULATE_DEVICE, the fits' budgets and tests/cuda_harness read it from
// here; tests/test_catalog.py checks that the op's docs, Python docstrings and the harness name
// the same paths. Plain C++: the kernels' host code and the torch-free harness include it.
#pragma once

#include <cstddef>

namespace alexconv {
namespace cuda {

// The paths a call can take. kWgmma and kMmaSync* are the register-gather implicit GEMM's
// engines (igemm/): wgmma (Hopper), and mma.sync with every CTA holding all 96 output
// channels (kMmaSync) or splitting them over 2 or 4 CTAs (kMmaSyncN48, kMmaSyncN24: the
// portable kernels of GPUs with 99 KB of shared memory per block, and A100's float32).
// kS2d is the space-to-depth implicit GEMM (s2d/: wgmma, Hopper), kS2dMmaSync its portable
// mma.sync kernel (sm_80+), kDirect the plain kernel (direct/), kAten ATen's own convolution
// (cuDNN, as nn.Conv2d) under the op's numerical contract, for GPUs and calls none of ours runs.
enum class Kernel { kDirect, kMmaSync, kMmaSyncN48, kMmaSyncN24, kWgmma, kS2d, kS2dMmaSync, kAten };

struct KernelEntry {
  Kernel kernel;
  const char* name;    // conv1_kernel()'s answer
  const char* family;  // the op/cuda folder that holds it ("" for ATen's)
};
inline constexpr KernelEntry kKernels[] = {
    {Kernel::kDirect, "direct", "direct"},
    {Kernel::kMmaSync, "mma_sync", "igemm"},
    {Kernel::kMmaSyncN48, "mma_sync_n48", "igemm"},
    {Kernel::kMmaSyncN24, "mma_sync_n24", "igemm"},
    {Kernel::kWgmma, "wgmma", "igemm"},
    {Kernel::kS2d, "s2d", "s2d"},
    {Kernel::kS2dMmaSync, "s2d_mma_sync", "s2d"},
    {Kernel::kAten, "aten", ""},
};

constexpr const char* kernel_name(Kernel kernel) {
  for (const KernelEntry& e : kKernels) {
    if (e.kernel == kernel) return e.name;
  }
  return "?";
}

// The shared memory a block can opt into per GPU class (CUDA programming guide, compute
// capabilities table): the budgets the kernels' fits are laid out for.
constexpr size_t kSmemTuring = 65536;   // sm_75
constexpr size_t kSmem99KB = 101376;    // sm_86, sm_89, sm_120
constexpr size_t kSmemA100 = 166912;    // sm_80, sm_87
constexpr size_t kSmemHopper = 232448;  // sm_90, sm_100

// The GPU classes ALEXCONV_EMULATE_DEVICE knows by compute capability alone.
struct GpuClass {
  int major, minor;
  size_t smem_per_block_optin;
  const char* examples;
};
inline constexpr GpuClass kGpuClasses[] = {
    {7, 5, kSmemTuring, "T4, RTX 20xx"},
    {8, 0, kSmemA100, "A100, A800, A30"},
    {8, 6, kSmem99KB, "RTX 30xx, A10, A10G, A40, RTX A6000"},
    {8, 7, kSmemA100, "Jetson Orin"},
    {8, 9, kSmem99KB, "RTX 40xx, L4, L40, L40S"},
    {9, 0, kSmemHopper, "H100, H200"},
    {10, 0, kSmemHopper, "B200"},
    {12, 0, kSmem99KB, "RTX 50xx"},
};

}  // namespace cuda
}  // namespace alexconv
