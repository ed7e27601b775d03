// Public C++ API of alexconv: AlexNet's first convolution as a PyTorch operator.
//
// conv1(input, weight, bias) == at::conv2d(input, weight, bias, /*stride=*/4, /*padding=*/2)
// for input [N, 3, H, W] (H, W >= 7), weight [96, 3, 11, 11], bias [96] or none,
// all float32, float16 or bfloat16 on one device. The call goes through the
// PyTorch dispatcher, so it reaches the CPU, CUDA or Meta kernel of the library
// exactly as torch.ops.alexconv.conv1 does from Python or TorchScript.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

namespace alexconv {

// allow_tf32 lets the CUDA float32 path round products to TF32's 10-bit mantissa
// (relative norm error up to 1e-3 instead of float32 accuracy): TF32 tensor cores,
// or on Hopper fp16 ones with range guards. It changes nothing on CPU or for
// half-precision inputs.
// (c10::optional: std::optional itself from torch 2.4 on; torch 1.13's own type before.)
at::Tensor conv1(const at::Tensor& input, const at::Tensor& weight,
                 const c10::optional<at::Tensor>& bias = c10::nullopt,
                 bool allow_tf32 = false);

// The operator's schema, as registered with TORCH_LIBRARY. Saved TorchScript
// models hold it, so it never changes incompatibly.
inline constexpr const char* kConv1Schema =
    "conv1(Tensor input, Tensor weight, Tensor? bias=None, *, bool allow_tf32=False) -> Tensor";

// Which kernel conv1 would run for these arguments, by name: "cpu" on CPU; on CUDA
// "wgmma", "s2d", "mma_sync", "aten" (cuDNN, where none of ours can run the call) or
// "direct" (docs/architecture.md). Raises what conv1 would raise for invalid arguments.
inline constexpr const char* kConv1KernelSchema =
    "conv1_kernel(Tensor input, Tensor weight, Tensor? bias=None, *, bool allow_tf32=False) -> str";

}  // namespace alexconv
