// Meta ("fake") kernel: shape, dtype and layout only. torch.compile and
// torch.export trace through it; it works on symbolic sizes.
#include <torch/library.h>

#include "../conv1_checks.h"

namespace alexconv {
namespace {

at::Tensor conv1_meta(const at::Tensor& input, const at::Tensor& weight,
                      const c10::optional<at::Tensor>& bias, bool /*allow_tf32*/, int64_t padding,
                      bool /*relu*/) {
  check_conv1_args(input, weight, bias, padding);
  return conv1_empty_output(input, weight, padding);
}

}  // namespace
}  // namespace alexconv

TORCH_LIBRARY_IMPL(alexconv, Meta, m) {
  m.impl("conv1", &alexconv::conv1_meta);
}
