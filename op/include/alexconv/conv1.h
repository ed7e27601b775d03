// Public C++ API of alexconv: AlexNet's first convolution as a PyTorch operator.
//
// conv1(input, weight, bias, allow_tf32, padding, relu) ==
//     at::conv2d(input, weight, bias, /*stride=*/4, padding), then at::relu where relu is set,
// for input [N, 3, H, W] (H, W >= 11 - 2 * padding), weight [C_out, 3, 11, 11] with
// 1 <= C_out <= 256, bias [C_out] or none, padding 0 to 5 (default 2: AlexNet as KernelBench
// has it), all float32, float16 or bfloat16 on one device. The call goes through the
// PyTorch dispatcher, so it reaches the CPU, CUDA or Meta kernel of the library
// exactly as torch.ops.alexconv.conv1 does from Python or TorchScript.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

namespace alexconv {

// allow_tf32 lets the CUDA float32 path round products to TF32's 10-bit mantissa
// (relative norm error up to 1e-3 instead of float32 accuracy): TF32 tensor cores,
// or on Hopper fp16 ones with range guards. It changes nothing on CPU or for
// half-precision inputs. relu applies max(x, 0) to the output as at::relu does (NaN stays
// NaN, -0.0 stays -0.0) in the op's epilogue; its gradient masks by the output, as relu's.
// (c10::optional: std::optional itself from torch 2.4 on; torch 1.13's own type before.)
at::Tensor conv1(const at::Tensor& input, const at::Tensor& weight,
                 const c10::optional<at::Tensor>& bias = c10::nullopt,
                 bool allow_tf32 = false, int64_t padding = 2, bool relu = false);

// The operator's schema, as registered with TORCH_LIBRARY. Saved TorchScript models hold
// calls to it, so it only grows compatibly: new arguments are keyword-only with defaults, at
// the end (tests/test_saved_model.py loads a model saved before padding and relu existed).
inline constexpr const char* kConv1Schema =
    "conv1(Tensor input, Tensor weight, Tensor? bias=None, *, bool allow_tf32=False, "
    "int padding=2, bool relu=False) -> Tensor";

// Which kernel conv1 would run for these arguments, by name: on CPU "cpu_avx512", "cpu_avx2",
// "cpu_baseline" or "aten" (op/cpu/conv1_cpu.cpp); on CUDA one of
// op/cuda/catalog.h's kKernels: "wgmma", "s2d", "s2d_mma_sync", "mma_sync", "mma_sync_n48",
// "mma_sync_n24", "aten" (cuDNN, where none of ours can run the call) or "direct"
// (docs/architecture.md); "none" for an empty output. Raises what conv1 would raise for
// invalid arguments.
inline constexpr const char* kConv1KernelSchema =
    "conv1_kernel(Tensor input, Tensor weight, Tensor? bias=None, *, bool allow_tf32=False, "
    "int padding=2, bool relu=False) -> str";

}  // namespace alexconv
