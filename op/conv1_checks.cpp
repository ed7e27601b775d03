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

template <size_t Rank>
void check_shape(const at::Tensor& t, const char* name,
                 const std::array<int64_t, Rank>& expected) {
  bool ok = t.dim() == static_cast<int64_t>(Rank);
  for (size_t i = 0; ok && i < Rank; ++i) {
    ok = holds(t.sym_size(static_cast<int64_t>(i)) == expected[i]);
  }
  if (!ok) {
    std::string want = "[";
    for (size_t i = 0; i < Rank; ++i) {
      want += (i ? ", " : "") + std::to_string(expected[i]);
    }
    TORCH_CHECK(false, "alexconv::conv1: ", name, " must have shape ", want,
                "], got ", t.sym_sizes());
  }
}

}  // namespace

void check_conv1_args(const at::Tensor& input, const at::Tensor& weight,
                      const c10::optional<at::Tensor>& bias) {
  TORCH_CHECK(input.defined(), "alexconv::conv1: input must be a defined tensor, got an undefined one");
  TORCH_CHECK(weight.defined(), "alexconv::conv1: weight must be a defined tensor, got an undefined one");
  check_plain_tensor(input, "input");
  check_plain_tensor(weight, "weight");

  TORCH_CHECK(input.dim() == 4, "alexconv::conv1: input must be 4-D [N, 3, H, W], got ",
              input.dim(), "-D with shape ", input.sym_sizes());
  TORCH_CHECK(holds(input.sym_size(1) == kInChannels),
              "alexconv::conv1: input must have ", kInChannels,
              " channels (dim 1), got shape ", input.sym_sizes());
  TORCH_CHECK(holds(input.sym_size(2) >= kMinInputSize) &&
                  holds(input.sym_size(3) >= kMinInputSize),
              "alexconv::conv1: input height and width must be at least ", kMinInputSize,
              " (kernel 11, padding 2), got shape ", input.sym_sizes());
  check_shape<4>(weight, "weight", {kOutChannels, kInChannels, kKernel, kKernel});

  TORCH_CHECK(weight.scalar_type() == input.scalar_type(),
              "alexconv::conv1: weight must have the input's dtype ", dtype_name(input.scalar_type()),
              ", got ", dtype_name(weight.scalar_type()));
  TORCH_CHECK(weight.device() == input.device(),
              "alexconv::conv1: weight must be on the input's device ", input.device(),
              ", got ", weight.device());

  if (bias.has_value() && bias->defined()) {
    const at::Tensor& b = *bias;
    check_plain_tensor(b, "bias");
    check_shape<1>(b, "bias", {kOutChannels});
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

at::Tensor conv1_empty_output(const at::Tensor& input, const at::Tensor& weight) {
  const std::array<c10::SymInt, 4> shape = {
      input.sym_size(0), c10::SymInt(kOutChannels),
      conv1_out_size(input.sym_size(2)), conv1_out_size(input.sym_size(3))};
  return at::empty_symint(shape, input.options().memory_format(
                                     conv1_output_memory_format(input, weight)));
}

}  // namespace alexconv
