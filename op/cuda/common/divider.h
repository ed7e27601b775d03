// Division by a divisor fixed when a plan is made, for the kernels' tile decoding.
#pragma once

#include <cstdint>

#include "../../conv1_geometry.h"  // ALEXCONV_HOST_DEVICE

namespace alexconv {
namespace cuda {

// n / d for n >= 0 and a divisor d >= 1 fixed when the plan is made. GPUs have no
// integer divider: a 32-bit division is ~20 instructions and a 64-bit one a call of
// ~70, and tile decoding divides several times per tile in every thread. Where n and
// d are below 2^31 (always, in practice) this is a multiply-high, an add and a shift
// with a magic number m = 2^32 (2^s - d) / d + 1, s = ceil(log2 d)
// ("division by invariant integers", Granlund & Montgomery, as in PyTorch's IntDivider).
struct Divider {
  int64_t divisor = 1;
  uint32_t magic = 1, shift = 0;
  Divider() = default;
  explicit Divider(int64_t d) : divisor(d) {  // d >= 1
    if (d >= (int64_t(1) << 31)) return;      // always the plain division
    while ((int64_t(1) << shift) < d) ++shift;
    magic = uint32_t((uint64_t(1) << 32) * ((uint64_t(1) << shift) - uint64_t(d)) / uint64_t(d) + 1);
  }
  ALEXCONV_HOST_DEVICE int64_t operator()(int64_t n) const {
    if (((n | divisor) >> 31) == 0) {
      const uint32_t high = uint32_t((uint64_t(uint32_t(n)) * magic) >> 32);
      return int64_t((high + uint32_t(n)) >> shift);  // high + n < 2^32 as n < 2^31
    }
    return n / divisor;
  }
  // n / divisor for 0 <= n < 2^31 and a divisor below 2^31: no branch, 32-bit math.
  ALEXCONV_HOST_DEVICE int small(int n) const {
    return int((uint32_t((uint64_t(uint32_t(n)) * magic) >> 32) + uint32_t(n)) >> shift);
  }
};

}  // namespace cuda
}  // namespace alexconv
