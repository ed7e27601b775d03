// The CPU backend's ATen path (ALEXCONV_CPU_KERNEL=aten): ATen's convolution as nn.Conv2d
// reaches it, under the op's contract and output format.
#pragma once

#include <ATen/core/Tensor.h>

namespace alexconv {

// ATen's convolution of the call (oneDNN where it applies), in the output memory format the op
// promises, relu as an in-place second pass; the output is ATen's own, the only one the call holds.
at::Tensor conv1_cpu_aten(const at::Tensor& input, const at::Tensor& weight,
                          const c10::optional<at::Tensor>& bias, int64_t pad, bool relu);

}  // namespace alexconv
