// Layouts conv1 does not support -- sparse, quantized, MKL-DNN and nested tensors --
// carry their own dispatch keys, so without a kernel here the dispatcher would answer
// with a generic "could not run ... with arguments from the 'SparseCPU' backend".
// These kernels run the shared checks instead, which name the offending argument.
#include <torch/library.h>

#include "../conv1_checks.h"

namespace alexconv {
namespace {

at::Tensor conv1_unsupported(const at::Tensor& input, const at::Tensor& weight,
                             const c10::optional<at::Tensor>& bias, bool /*allow_tf32*/,
                             int64_t padding, bool /*relu*/) {
  check_conv1_args(input, weight, bias, padding);
  // Unreachable while the checks reject every layout registered below; a safety net
  // for a key added here without a matching check.
  TORCH_CHECK(false, "alexconv::conv1: this tensor layout is not supported, got input ",
              input.layout(), " ", input.scalar_type(), ", weight ", weight.layout(), " ",
              weight.scalar_type());
}

}  // namespace
}  // namespace alexconv

TORCH_LIBRARY_IMPL(alexconv, SparseCPU, m) { m.impl("conv1", &alexconv::conv1_unsupported); }
TORCH_LIBRARY_IMPL(alexconv, SparseCUDA, m) { m.impl("conv1", &alexconv::conv1_unsupported); }
TORCH_LIBRARY_IMPL(alexconv, SparseCsrCPU, m) { m.impl("conv1", &alexconv::conv1_unsupported); }
TORCH_LIBRARY_IMPL(alexconv, SparseCsrCUDA, m) { m.impl("conv1", &alexconv::conv1_unsupported); }
TORCH_LIBRARY_IMPL(alexconv, QuantizedCPU, m) { m.impl("conv1", &alexconv::conv1_unsupported); }
TORCH_LIBRARY_IMPL(alexconv, QuantizedCUDA, m) { m.impl("conv1", &alexconv::conv1_unsupported); }
TORCH_LIBRARY_IMPL(alexconv, MkldnnCPU, m) { m.impl("conv1", &alexconv::conv1_unsupported); }
TORCH_LIBRARY_IMPL(alexconv, NestedTensorCPU, m) { m.impl("conv1", &alexconv::conv1_unsupported); }
TORCH_LIBRARY_IMPL(alexconv, NestedTensorCUDA, m) { m.impl("conv1", &alexconv::conv1_unsupported); }
TORCH_LIBRARY_IMPL(alexconv, AutogradNestedTensor, m) { m.impl("conv1", &alexconv::conv1_unsupported); }
