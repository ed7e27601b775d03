// The fixed geometry of AlexNet's first convolution, in one place.
//
// Plain C++ with no torch headers so that the CUDA translation units (which must
// compile against the CPU-only torch wheel too) and the CPU micro-kernel share the
// same constants as the CPU, CUDA host and Meta kernels. The micro-kernel is built
// once per instruction set: it must not instantiate conv1_out_size, whose copies
// the linker would merge across those builds.
#pragma once

#include <cstdint>

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

}  // namespace alexconv
