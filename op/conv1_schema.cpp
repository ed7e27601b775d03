// The one TORCH_LIBRARY(alexconv, m): the operator's schema, and conv1_kernel, which
// names the kernel a call would take. Backends register their kernels in op/<backend>/
// with TORCH_LIBRARY_IMPL.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "alexconv/conv1.h"

namespace alexconv {

at::Tensor conv1(const at::Tensor& input, const at::Tensor& weight,
                 const c10::optional<at::Tensor>& bias, bool allow_tf32, int64_t padding,
                 bool relu) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("alexconv::conv1", "")
                             .typed<decltype(conv1)>();
  return op.call(input, weight, bias, allow_tf32, padding, relu);
}

}  // namespace alexconv

TORCH_LIBRARY(alexconv, m) {
  m.def(alexconv::kConv1Schema);
  m.def(alexconv::kConv1KernelSchema);
}
