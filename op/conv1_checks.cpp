#include "conv1_checks.h"

#include <ATen/ops/empty.h>
#include <c10/core/ScalarType.h>

#include <array>
#include <string>

#include "compat.h"
#include "conv1_geometry.h"

namespace alexconv {
namespace {

// Sizes may be symbolic under torch.compile; evaluating a check guards on it.
template <typename Condition>
bool holds(const Condition& condition) {
  return compat::guard(condition, __FILE__, __LINE__);
}

using compat::dtype_name;

bool is_supported_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kHalf || t == at::kBFloat16;
}

void check_plain_tensor(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.layout() == at::kStrided, "alexconv::conv1: ", name,
              " must be a dense (strided) tensor, got layout ", t.layout());
  TORCH_CHECK(!t.is_nested(), "alexconv::conv1: ", name,
              " must be a dense (strided) tensor, got a nested tensor");
  TORCH_CHECK(!t.is_quantized(), "alexconv::conv1: ", name,
              " must not be quantized, got dtype ", dtype_name(t.scalar_type()));
  TORCH_CHECK(is_supported_dtype(t.scalar_type()), "alexconv::conv1: ", name,
              " must have dtype float32, float16 or bfloat16, got ", dtype_name(t.scalar_type()));
}

}  // namespace

void check_conv1_args(const at::Tensor& input, const at::Tensor& weight,
                      const c10::optional<at::Tensor>& bias, int64_t padding) {
  TORCH_CHECK(input.defined(), "alexconv::conv1: input must be a defined tensor, got an undefined one");
  TORCH_CHECK(weight.defined(), "alexconv::conv1: weight must be a defined tensor, got an undefined one");
  TORCH_CHECK(padding >= 0 && padding <= kMaxPad, "alexconv::conv1: padding must be in [0, ", kMaxPad,
              "], got ", padding);
  check_plain_tensor(input, "input");
  check_plain_tensor(weight, "weight");

  TORCH_CHECK(input.dim() == 4, "alexconv::conv1: input must be 4-D [N, 3, H, W], got ",
              input.dim(), "-D with shape ", input.sym_sizes());
  TORCH_CHECK(holds(input.sym_size(1) == kInChannels),
              "alexconv::conv1: input must have ", kInChannels,
              " channels (dim 1), got shape ", input.sym_sizes());
  const int64_t min_size = min_input_size(padding);
  TORCH_CHECK(holds(input.sym_size(2) >= min_size) && holds(input.sym_size(3) >= min_size),
              "alexconv::conv1: input height and width must be at least ", min_size,
              " (kernel 11, padding ", padding, "), got shape ", input.sym_sizes());
  // Output channels are free within [1, kMaxOutChannels]; the rest of the shape is fixed.
  const bool weight_ok = weight.dim() == 4 && holds(weight.sym_size(0) >= 1) &&
                         holds(weight.sym_size(0) <= kMaxOutChannels) &&
                         holds(weight.sym_size(1) == kInChannels) &&
                         holds(weight.sym_size(2) == kKernel) && holds(weight.sym_size(3) == kKernel);
  TORCH_CHECK(weight_ok, "alexconv::conv1: weight must have shape [C_out, ", kInChannels, ", ", kKernel,
              ", ", kKernel, "] with C_out in [1, ", kMaxOutChannels, "], got ", weight.sym_sizes());

  TORCH_CHECK(weight.scalar_type() == input.scalar_type(),
              "alexconv::conv1: weight must have the input's dtype ", dtype_name(input.scalar_type()),
              ", got ", dtype_name(weight.scalar_type()));
  TORCH_CHECK(weight.device() == input.device(),
              "alexconv::conv1: weight must be on the input's device ", input.device(),
              ", got ", weight.device());

  if (bias.has_value() && bias->defined()) {
    const at::Tensor& b = *bias;
    check_plain_tensor(b, "bias");
    TORCH_CHECK(b.dim() == 1 && holds(b.sym_size(0) == weight.sym_size(0)),
                "alexconv::conv1: bias must have shape [", weight.sym_size(0),
                "] (the weight's output channels), got ", b.sym_sizes());
    TORCH_CHECK(b.scalar_type() == input.scalar_type(),
                "alexconv::conv1: bias must have the input's dtype ", dtype_name(input.scalar_type()),
                ", got ", dtype_name(b.scalar_type()));
    TORCH_CHECK(b.device() == input.device(),
                "alexconv::conv1: bias must be on the input's device ", input.device(),
                ", got ", b.device());
  }
}

c10::MemoryFormat conv1_output_memory_format(const at::Tensor& input,
                                             const at::Tensor& weight) {
  const bool channels_last =
      input.suggest_memory_format() == at::MemoryFormat::ChannelsLast ||
      weight.suggest_memory_format() == at::MemoryFormat::ChannelsLast;
  return channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
}

at::Tensor conv1_empty_output(const at::Tensor& input, const at::Tensor& weight,
                              int64_t padding) {
  const std::array<c10::SymInt, 4> shape = {
      input.sym_size(0), weight.sym_size(0),
      conv1_out_size(input.sym_size(2), padding), conv1_out_size(input.sym_size(3), padding)};
  return at::empty_symint(shape, input.options().memory_format(
                                     conv1_output_memory_format(input, weight)));
}

at::Tensor conv1_in_output_format(const at::Tensor& y, const at::Tensor& input, const at::Tensor& weight) {
  const c10::MemoryFormat format = conv1_output_memory_format(input, weight);
  return y.is_contiguous(format) ? y : y.contiguous(format);
}

}  // namespace alexconv
