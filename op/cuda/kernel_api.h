// The boundary between the torch-facing CUDA host code (conv1_cuda.cpp, dispatch.cpp)
// and the kernel families (igemm/, s2d/, direct/): the problem, the device, and what
// each family can do and launches. Plain C++ and the CUDA runtime only: the .cu files include no
// torch headers, so they compile on machines whose torch has no CUDA.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../conv1_geometry.h"

namespace alexconv {
namespace cuda {

enum class DType { kFloat32, kFloat16, kBFloat16 };
inline int64_t element_bytes(DType t) { return t == DType::kFloat32 ? 4 : 2; }

// One conv1 call. Pointers are device pointers; strides are in elements, in
// (N, C, H, W) order for input/weight/output. bias may be null.
struct Problem {
  const void* input = nullptr;
  const void* weight = nullptr;
  const void* bias = nullptr;
  void* output = nullptr;
  DType dtype = DType::kFloat32;
  bool allow_tf32 = false;
  int64_t batch = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t in_stride[4] = {};
  int64_t weight_stride[4] = {};
  int64_t bias_stride = 0;
  int64_t out_stride[4] = {};
  // Each output pixel's channels are one contiguous run starting 16-byte aligned
  // (channels_last): the epilogues store along channels. See pixel_major_output.
  bool out_pixel_major = false;
  // The weight's output channels. The implicit GEMMs compute 96 (past this count against
  // zero weights) and store these: a multiple of 8 up to 96 (kernels_cover in dispatch.h);
  // the direct kernel takes any count.
  int64_t out_channels = kOutChannels;
  // max(y, 0) in the epilogue, as torch.relu on CUDA does it to the stored value: NaN stays
  // NaN, -0.0 becomes +0.0 (relu_output in common/dtype.cuh).
  bool relu = false;
};

// Whether `p`'s output qualifies for Problem::out_pixel_major. A pixel's run is out_channels
// elements (a multiple of 8), a whole number of 16-byte units when its start is aligned.
inline bool pixel_major_output(const Problem& p) {
  const int64_t per_unit = 16 / element_bytes(p.dtype);
  return p.out_stride[1] == 1 && p.out_stride[0] % per_unit == 0 && p.out_stride[2] % per_unit == 0 &&
         p.out_stride[3] % per_unit == 0 && reinterpret_cast<uintptr_t>(p.output) % 16 == 0;
}

// Properties of the device the launch goes to, read by the caller (which owns
// the device guard) so the kernels need no device queries of their own.
struct DeviceInfo {
  int sm_count = 0;
  int major = 0, minor = 0;
  size_t max_smem_per_block_optin = 0;
  bool allow_wgmma = true;  // false forces the mma.sync engine on Hopper (tests); Resident fit only
  bool aten_available = false;  // ATen's convolution can run calls none of ours can
  bool emulated = false;        // major, minor and the shared memory are another GPU's
};

// The kernel families; dispatch.cpp picks one per call. Each enqueues the
// convolution on `stream` and returns errors of its set-up calls; the caller checks
// the launch itself with C10_CUDA_KERNEL_LAUNCH_CHECK().
cudaError_t launch_conv1_direct(const Problem& problem, cudaStream_t stream);
// The register-gather implicit GEMM (igemm/) in one of its fits (igemm/smem_layout.cuh):
// every CTA holding all 96 output channels' weights (Resident: 231,552 bytes of shared
// memory in float32 modes, 153,984 in 16-bit ones), or the CTAs splitting them in two
// (HalfN: 157,056 / 98,688 bytes) or, float32 only, four (QuarterN: 93,312 bytes) groups.
enum class IgemmFit { kResident, kHalfN, kQuarterN, kNone };
// Whether it can run this problem on this device in that fit (the fit's shared memory, the
// plan's 32-bit arithmetic, sm_80+), and the widest fit that can (kNone: none).
bool igemm_fit_supported(const Problem& problem, const DeviceInfo& device, IgemmFit fit);
IgemmFit igemm_fit(const Problem& problem, const DeviceInfo& device);
cudaError_t launch_conv1_igemm(const Problem& problem, const DeviceInfo& device, IgemmFit fit,
                               cudaStream_t stream);
// Whether it will use the Hopper wgmma engine there (sm_90 device, sm_90a build).
bool wgmma_available(const DeviceInfo& device);

// How the register-gather engine (launch_conv1_igemm) stages this problem's input
// windows on this device: one TMA copy per window, 16-byte or 4-byte cp.async units,
// or element loads through registers. The automatic choice of the space-to-depth
// kernel depends on it.
enum class WindowStaging { kTma, kCopy16, kCopy4, kRegisters };
WindowStaging igemm_window_staging(const Problem& problem, const DeviceInfo& device);

// The space-to-depth implicit GEMM (Hopper): what it would do with this problem on
// this device (dispatch.cpp's rules read these), and its launch.
struct S2dFacts {
  bool supported = false;    // this device and build can run it
  int64_t tiles = 0;         // 192-pixel tiles of its plan
  bool tma_boxes = false;    // it would stage windows as TMA boxes (16-bit, allow_tf32)
  // It would stage channels_last tiles by one bulk copy of their pixels, in the operand
  // mode of the problem's dtype (float32: only with allow_tf32).
  bool pixel_spans = false;
};
S2dFacts s2d_facts(const Problem& problem, const DeviceInfo& device);
cudaError_t launch_conv1_s2d(const Problem& problem, const DeviceInfo& device, cudaStream_t stream);

// The portable space-to-depth implicit GEMM (sm_80+, mma.sync; every mode: 16-bit, float32 with
// allow_tf32 as float16 words, float32 accurate as bf16x3): what it would do with this problem on
// this device, and its launch.
struct S2dMmaSyncFacts {
  // The output-channel groups its CTAs split the call into: 1 (every CTA holds all 96 channels'
  // weights, 16-bit words in up to 158,208 bytes of shared memory: A100, Hopper), 2 (48 each: 16-bit
  // words in up to 98,304 bytes, every sm_80+ GPU's 99 KB; bf16x3 in 157,440: A100, Hopper),
  // 3 (bf16x3, 32 each, in 101,120: 99 KB); 0: it cannot run the call.
  int groups = 0;
  int64_t tiles = 0;          // 192-pixel tiles of its plan
  bool pair_staging = false;  // it would load windows as column pairs (s2d/pair_producers.cuh)
};
S2dMmaSyncFacts s2d_mma_sync_facts(const Problem& problem, const DeviceInfo& device);
cudaError_t launch_conv1_s2d_mma_sync(const Problem& problem, const DeviceInfo& device, cudaStream_t stream);

}  // namespace cuda
}  // namespace alexconv
