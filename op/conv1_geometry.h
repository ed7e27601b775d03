// The fixed geometry of AlexNet's first convolution, in one place.
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
constexpr int64_t kOutChannels = 96;
constexpr int64_t kKernel = 11;
constexpr int64_t kStride = 4;
constexpr int64_t kPad = 2;
// The reduction length of one output value: 3 * 11 * 11.
constexpr int64_t kTaps = kInChannels * kKernel * kKernel;
// Smallest H or W that yields one output row/column: (7 + 2*2 - 11) / 4 + 1 == 1.
constexpr int64_t kMinInputSize = kKernel - 2 * kPad;

// Output extent along one spatial axis. A template so that the Meta kernel can
// pass c10::SymInt (dynamic shapes) and the real kernels int64_t.
template <typename T>
T conv1_out_size(const T& in) {
  return (in - kMinInputSize) / kStride + 1;
}

// Input rows or columns that `out_extent` consecutive output rows or columns read.
ALEXCONV_HOST_DEVICE inline int64_t window_extent(int64_t out_extent) {
  return kStride * (out_extent - 1) + kKernel;
}

}  // namespace alexconv
