// The geometry of AlexNet's first convolution, in one place: fixed input channels, kernel
// and stride; output channels and padding vary within the op's range (issue 46), and the
// CUDA kernels are specialised for kOutChannels and kPad.
//
// Plain C++ with no torch headers so that the CUDA translation units (which must
// compile against the CPU-only torch wheel too) and the CPU micro-kernel share the
// same constants as the CPU, CUDA host and Meta kernels. The micro-kernel is built
// once per instruction set: it must not call conv1_out_size or window_extent, whose
// copies the linker would merge across those builds.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ALEXCONV_HOST_DEVICE __host__ __device__
#else
#define ALEXCONV_HOST_DEVICE
#endif

namespace alexconv {

constexpr int64_t kInChannels = 3;
constexpr int64_t kKernel = 11;
constexpr int64_t kStride = 4;
// The output channels and padding the CUDA kernels (op/cuda/{igemm,s2d,direct}) are built
// for, and the op's defaults (AlexNet as KernelBench has it). Other calls go to ATen there.
constexpr int64_t kOutChannels = 96;
constexpr int64_t kPad = 2;
// The range the op accepts on every backend (issue 46): torchvision's AlexNet has 64 output
// channels with padding 2, the original 96 with padding 0; up to 256 channels and padding 5
// covers the variants in use with room to spare, and keeps every padded tap window inside
// the 11x11 kernel's reach (padding < 6).
constexpr int64_t kMaxOutChannels = 256;
constexpr int64_t kMaxPad = 5;
// The reduction length of one output value: 3 * 11 * 11.
constexpr int64_t kTaps = kInChannels * kKernel * kKernel;

// Smallest H or W that yields one output row/column: kernel 11 over the padded extent
// (7 at padding 2, 11 at padding 0, 1 at padding 5).
constexpr int64_t min_input_size(int64_t pad) { return kKernel - 2 * pad; }

// Output extent along one spatial axis, for in >= min_input_size(pad). A template so that
// the Meta kernel can pass c10::SymInt (dynamic shapes) and the real kernels int64_t.
template <typename T>
T conv1_out_size(const T& in, int64_t pad) {
  return (in - min_input_size(pad)) / kStride + 1;
}

// Input rows or columns that `out_extent` consecutive output rows or columns read.
ALEXCONV_HOST_DEVICE inline int64_t window_extent(int64_t out_extent) {
  return kStride * (out_extent - 1) + kKernel;
}

}  // namespace alexconv
