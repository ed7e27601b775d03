// The CPU backend's ATen path (conv1_cpu_aten.h).
#include "conv1_cpu_aten.h"

#include <ATen/Context.h>
#include <ATen/Functions.h>

#include "../conv1_checks.h"
#include "../conv1_geometry.h"

namespace alexconv {
namespace {

// ATen's convolution, as nn.Conv2d reaches it (oneDNN where it applies), in the output memory
// format the op promises; relu as a second pass, in place (at::relu_'s rule, which the
// micro-kernel follows).
at::Tensor aten_convolution(const at::Tensor& input, const at::Tensor& weight,
                            const c10::optional<at::Tensor>& bias, int64_t pad) {
  const int64_t stride = kStride, dilation = 1;
  const at::Context& ctx = at::globalContext();
  return at::_convolution(input, weight, bias, {stride, stride}, {pad, pad}, {dilation, dilation},
                          /*transposed=*/false, /*output_padding=*/{0, 0}, /*groups=*/1,
                          ctx.benchmarkCuDNN(), ctx.deterministicCuDNN() || ctx.deterministicAlgorithms(),
                          ctx.userEnabledCuDNN(), /*allow_tf32=*/false);
}

// Whether ATen has a float16 convolution on CPU (torch 1.13 has none: "slow_conv2d_cpu" not
// implemented for 'Half'), probed once on a 1x1 call.
bool aten_has_float16_convolution() {
  static const bool has = [] {
    try {
      const at::Tensor one = at::ones({1, 1, 1, 1}, at::TensorOptions().dtype(at::kHalf));
      at::_convolution(one, one, c10::nullopt, {1, 1}, {0, 0}, {1, 1}, false, {0, 0}, 1, false, false,
                       false, false);
      return true;
    } catch (const c10::Error&) {
      return false;
    }
  }();
  return has;
}

// Whether ATen has a float16 relu on CPU (torch 1.13 has none), probed once on one element.
bool aten_has_float16_relu() {
  static const bool has = [] {
    try {
      at::ones({1}, at::TensorOptions().dtype(at::kHalf)).relu_();
      return true;
    } catch (const c10::Error&) {
      return false;
    }
  }();
  return has;
}

}  // namespace

// ATen allocates the output, the only one the call holds (as for nn.Conv2d, issue 66): the caller
// allocates none for this path. float16 where ATen has no float16 convolution (torch 1.13, only
// when forced): ATen's float32 convolution of the same values, rounded once.
at::Tensor conv1_cpu_aten(const at::Tensor& input, const at::Tensor& weight,
                          const c10::optional<at::Tensor>& bias, int64_t pad, bool relu) {
  at::Tensor y;
  if (input.scalar_type() == at::kHalf && !aten_has_float16_convolution()) {
    c10::optional<at::Tensor> bias_f;
    if (bias.has_value() && bias->defined()) bias_f = bias->to(at::kFloat);
    y = aten_convolution(input.to(at::kFloat), weight.to(at::kFloat), bias_f, pad).to(at::kHalf);
  } else {
    y = aten_convolution(input, weight, bias, pad);
  }
  y = conv1_in_output_format(y, input, weight);
  if (!relu) return y;
  // float16 where ATen has no float16 relu on CPU (torch 1.13): at::relu's rule spelled out,
  // through a mask of one byte per output element.
  return y.scalar_type() == at::kHalf && !aten_has_float16_relu() ? y.masked_fill_(y.lt(0), 0) : y.relu_();
}

}  // namespace alexconv
