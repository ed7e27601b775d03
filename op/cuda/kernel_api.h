// The boundary between the torch-facing CUDA host code (conv1_cuda.cpp, dispatch.cpp)
// and the kernel families (igemm/, s2d/, direct/): the problem and the device. What each
// family makes of them is its launch plan (launch_plan.h). Plain C++ and the CUDA runtime
// only: the .cu files include no torch headers, so they compile on machines whose torch has
// no CUDA.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../conv1_geometry.h"

namespace alexconv {
namespace cuda {

enum class DType { kFloat32, kFloat16, kBFloat16 };

// Whether the implicit GEMMs store output channel counts that are no multiple of 8 (the float32
// epilogue's store_channels_below, common/epilogue.cuh): in builds by CUDA 12 and later. CUDA
// 11.8's ptxas crashes on that call with line info; its builds keep multiples of 8 (kernels_cover).
constexpr bool kAnyChannelCount = CUDART_VERSION >= 12000;
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
  // The weight's output channels, 1 to 96 (kernels_cover in dispatch.h). The implicit GEMMs
  // compute 96 (past this count against zero weights) and store these.
  int64_t out_channels = kOutChannels;
  // Zeros around the image on each side, 0 to kMaxPad: output (oy, ox) reads input rows from
  // 4 oy - pad and columns from 4 ox - pad (Tile::iy0 / ix0 in the families' plans). The
  // register gather takes even paddings only (its K order pairs even window columns).
  int64_t pad = kPad;
  // max(y, 0) in the epilogue, as torch.relu on CUDA does it to the stored value: NaN stays
  // NaN, -0.0 becomes +0.0 (relu_output in common/dtype.cuh).
  bool relu = false;
};

// Whether `p`'s output qualifies for Problem::out_pixel_major. A pixel's run is out_channels
// elements, stored a whole n-tile (8 channels) at a time: counts that are a multiple of 8, each
// run a whole number of 16-byte units when its start is aligned. Other counts store channels
// one by one along out_stride[1].
inline bool pixel_major_output(const Problem& p) {
  const int64_t per_unit = 16 / element_bytes(p.dtype);
  return p.out_stride[1] == 1 && p.out_channels % 8 == 0 && p.out_stride[0] % per_unit == 0 &&
         p.out_stride[2] % per_unit == 0 && p.out_stride[3] % per_unit == 0 &&
         reinterpret_cast<uintptr_t>(p.output) % 16 == 0;
}

// Properties of the device the launch goes to, read by the caller (which owns
// the device guard) so the kernels need no device queries of their own.
struct DeviceInfo {
  int sm_count = 0;
  int major = 0, minor = 0;
  size_t max_smem_per_block_optin = 0;
  bool aten_available = false;  // ATen's convolution can run calls none of ours can
  bool emulated = false;        // major, minor and the shared memory are another GPU's
};

}  // namespace cuda
}  // namespace alexconv
