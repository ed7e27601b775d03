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

// ATen's convolution of this call (`y`, which ATen allocated) as the op returns it: in the
// memory format the op promises (laid out as is_contiguous(format) judges), without a copy
// wherever ATen already chose it. ATen's backends pick their output's format by the rule
// conv1_output_memory_format spells out (cuDNN's cudnn_conv_suggest_memory_format, oneDNN's
// mkldnn_conv_use_channels_last and the CPU's slow2d thnn_conv_use_channels_last, in
// ATen/native/ConvUtils.h), so `y` comes back as it is. Only CUDA's convolution without cuDNN
// (disabled, or declining the call: bfloat16 below sm_80, an image past its 32-bit indexing)
// writes NCHW whatever the inputs: there a channels_last call's output is copied into the
// promised format, two outputs for a moment (nn.Conv2d returns that NCHW output).
at::Tensor conv1_in_output_format(const at::Tensor& y, const at::Tensor& input, const at::Tensor& weight);

}  // namespace alexconv
