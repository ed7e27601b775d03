// One output value computed directly: float accumulation over the 363 taps, any
// strides, IEEE semantics for every input (an Inf or NaN affects exactly the
// outputs whose receptive field holds it). The direct kernel is this, once per
// thread; the space-to-depth kernel falls back to it for tiles whose input holds
// Inf or NaN (see s2d/s2d.cu).
#pragma once

#include <cstdint>

#include "../../conv1_geometry.h"
#include "../common/dtype.cuh"
#include "../kernel_api.h"  // DType, Problem

namespace alexconv {
namespace cuda {

// Weight tap (co, ci, r, s) as float, through the weight's strides: both the sum and
// the padding check below read taps this way.
template <DType T>
__device__ float weight_tap(const Problem& p, int64_t co, int64_t ci, int64_t r, int64_t s) {
  const auto* w = static_cast<const typename Storage<T>::type*>(p.weight);
  return to_float<T>(w[co * p.weight_stride[0] + ci * p.weight_stride[1] + r * p.weight_stride[2] +
                       s * p.weight_stride[3]]);
}

// Padding is a zero that still multiplies its weight in F.conv2d, so an infinite or
// NaN weight over the padding makes the output NaN (0 * inf). Checked apart from the
// sum, on the weights alone and only for windows that reach the padding: multiplying
// the padding inside the sum cost the space-to-depth kernel, which calls this as its
// fallback, 16-byte spills in its 16-bit variants.
template <DType T>
__device__ bool padding_meets_nonfinite_weight(const Problem& p, int64_t co, int64_t oy, int64_t ox) {
  const int64_t y0 = oy * kStride - p.pad, x0 = ox * kStride - p.pad;
  if (y0 >= 0 && x0 >= 0 && y0 + kKernel <= p.in_h && x0 + kKernel <= p.in_w) return false;
  bool poisoned = false;
  for (int64_t ci = 0; ci < kInChannels; ++ci) {
    for (int64_t r = 0; r < kKernel; ++r) {
      const bool row_inside = y0 + r >= 0 && y0 + r < p.in_h;
      for (int64_t s = 0; s < kKernel; ++s) {
        if (row_inside && x0 + s >= 0 && x0 + s < p.in_w) continue;
        poisoned |= !isfinite(weight_tap<T>(p, co, ci, r, s));
      }
    }
  }
  return poisoned;
}

template <DType T>
__device__ float direct_output(const Problem& p, int64_t n, int64_t co, int64_t oy, int64_t ox) {
  using S = typename Storage<T>::type;
  const S* in = static_cast<const S*>(p.input);
  const S* b = static_cast<const S*>(p.bias);
  float acc = b ? to_float<T>(b[co * p.bias_stride]) : 0.f;
  for (int64_t ci = 0; ci < kInChannels; ++ci) {
    for (int64_t r = 0; r < kKernel; ++r) {
      const int64_t iy = oy * kStride - p.pad + r;
      if (iy < 0 || iy >= p.in_h) continue;
      for (int64_t s = 0; s < kKernel; ++s) {
        const int64_t ix = ox * kStride - p.pad + s;
        if (ix < 0 || ix >= p.in_w) continue;
        const float x = to_float<T>(in[n * p.in_stride[0] + ci * p.in_stride[1] +
                                       iy * p.in_stride[2] + ix * p.in_stride[3]]);
        acc = fmaf(x, weight_tap<T>(p, co, ci, r, s), acc);
      }
    }
  }
  const float nan = __int_as_float(0x7fc00000);
  return padding_meets_nonfinite_weight<T>(p, co, oy, ox) ? nan : acc;
}

}  // namespace cuda
}  // namespace alexconv
