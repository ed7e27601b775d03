// Argument checks and output allocation shared by every backend (CPU, CUDA, Meta).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

namespace alexconv {

// Raises a RuntimeError that names the offending argument, what was expected and
// what was given. Works on symbolic shapes, so the Meta kernel uses it too.
void check_conv1_args(const at::Tensor& input, const at::Tensor& weight,
                      const c10::optional<at::Tensor>& bias, int64_t padding);

// The memory format F.conv2d would pick for its output (channels_last if the
// input or the weight suggests it), so that the op is a drop-in for layouts too.
c10::MemoryFormat conv1_output_memory_format(const at::Tensor& input,
                                             const at::Tensor& weight);

// An uninitialised output of the right (possibly symbolic) shape, dtype, device
// and memory format: [N, weight.size(0), out_h, out_w] for this padding.
at::Tensor conv1_empty_output(const at::Tensor& input, const at::Tensor& weight,
                              int64_t padding);

}  // namespace alexconv
