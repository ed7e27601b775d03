// One output value computed directly: float accumulation over the 363 taps, any
// strides, IEEE semantics for every input (an Inf or NaN affects exactly the
// outputs whose receptive field holds it). The direct kernel is this, once per
// thread; the space-to-depth kernel falls back to it for tiles whose input holds
// Inf or NaN (see conv1_s2d.cu).
#pragma once

#include <cstdint>

#include "../conv1_geometry.h"
#include "conv1_launch.h"  // DType, Problem
#include "conv1_dtype.cuh"

namespace alexconv {
namespace cuda {

// kMultiplyPadding: padding is a zero that still multiplies its weight, as in
// F.conv2d, so an infinite or NaN weight over the padding gives NaN (0 * inf). The
// direct kernel does; the space-to-depth kernel's fallback skips padded taps (the
// multiply costs it registers: 16-byte spills), which differs only where an infinite
// weight lies over the padding of a tile whose inputs hold Inf or NaN.
template <DType T, bool kMultiplyPadding = false>
__device__ float direct_output(const Problem& p, int64_t n, int64_t co, int64_t oy, int64_t ox) {
  using S = typename Storage<T>::type;
  const S* in = static_cast<const S*>(p.input);
  const S* w = static_cast<const S*>(p.weight);
  const S* b = static_cast<const S*>(p.bias);
  float acc = b ? to_float<T>(b[co * p.bias_stride]) : 0.f;
  for (int64_t ci = 0; ci < kInChannels; ++ci) {
    for (int64_t r = 0; r < kKernel; ++r) {
      const int64_t iy = oy * kStride - kPad + r;
      const bool row_inside = iy >= 0 && iy < p.in_h;
      if (!kMultiplyPadding && !row_inside) continue;
      for (int64_t s = 0; s < kKernel; ++s) {
        const int64_t ix = ox * kStride - kPad + s;
        const bool inside = row_inside && ix >= 0 && ix < p.in_w;
        if (!kMultiplyPadding && !inside) continue;
        const float x = inside ? to_float<T>(in[n * p.in_stride[0] + ci * p.in_stride[1] +
                                                iy * p.in_stride[2] + ix * p.in_stride[3]])
                               : 0.f;
        const float k = to_float<T>(w[co * p.weight_stride[0] + ci * p.weight_stride[1] +
                                      r * p.weight_stride[2] + s * p.weight_stride[3]]);
        acc = fmaf(x, k, acc);
      }
    }
  }
  return acc;
}

}  // namespace cuda
}  // namespace alexconv
