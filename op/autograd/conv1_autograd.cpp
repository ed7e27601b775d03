// Autograd: the forward is ours; the gradients are ATen's convolution_backward (cuDNN,
// oneDNN or ATen's own kernels, the same ones nn.Conv2d's backward uses). Training
// through ModelNew then updates its weights like the reference Model instead of
// leaving them with no gradient. Double backward works too: convolution_backward is
// itself differentiable. With relu, the output gradient is first masked where the output
// is not positive (at::threshold_backward on the saved output: exactly relu's own backward).
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "../conv1_geometry.h"
#include "alexconv/conv1.h"

namespace alexconv {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class Conv1Function : public torch::autograd::Function<Conv1Function> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                            bool allow_tf32, int64_t padding, bool relu) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor out = conv1(input, weight, bias, allow_tf32, padding, relu);
    // relu's mask comes from the output (as F.relu's backward): saved only where needed.
    ctx->save_for_backward({input, weight, relu ? out : at::Tensor()});
    ctx->saved_data["has_bias"] = bias.has_value();
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["relu"] = relu;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    const int64_t pad = ctx->saved_data["padding"].toInt();
    const at::Tensor grad_out = ctx->saved_data["relu"].toBool()
                                    ? at::threshold_backward(grad_outputs[0], saved[2], 0)
                                    : grad_outputs[0];
    const std::array<bool, 3> wanted = {ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                                        has_bias && ctx->needs_input_grad(2)};
    const std::vector<int64_t> bias_sizes = {saved[1].size(0)};
    auto [grad_input, grad_weight, grad_bias] = at::convolution_backward(
        grad_out, saved[0], saved[1],
        has_bias ? at::OptionalIntArrayRef(bias_sizes) : at::OptionalIntArrayRef(),
        /*stride=*/{kStride, kStride}, /*padding=*/{pad, pad}, /*dilation=*/{1, 1},
        /*transposed=*/false, /*output_padding=*/{0, 0}, /*groups=*/1, wanted);
    return {grad_input, grad_weight, grad_bias, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor conv1_autograd(const at::Tensor& input, const at::Tensor& weight,
                          const c10::optional<at::Tensor>& bias, bool allow_tf32, int64_t padding,
                          bool relu) {
  // Inference (no_grad, or nothing requiring grad) skips the graph node and its saved
  // tensors: batch-1 latency is where they would show.
  const bool wants_grad = input.requires_grad() || weight.requires_grad() ||
                          (bias.has_value() && bias->requires_grad());
  if (!wants_grad || !at::GradMode::is_enabled()) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return conv1(input, weight, bias, allow_tf32, padding, relu);
  }
  return Conv1Function::apply(input, weight, bias, allow_tf32, padding, relu);
}

}  // namespace
}  // namespace alexconv

TORCH_LIBRARY_IMPL(alexconv, Autograd, m) {
  m.impl("conv1", &alexconv::conv1_autograd);
}
