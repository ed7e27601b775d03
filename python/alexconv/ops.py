"""The Python face of ``torch.ops.alexconv.conv1``."""

from __future__ import annotations

import torch


def conv1(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    allow_tf32: bool = False,
    padding: int = 2,
    relu: bool = False,
) -> torch.Tensor:
    """``F.conv2d(input, weight, bias, stride=4, padding=padding)`` through alexconv's kernels,
    followed by ``F.relu`` where ``relu`` is set.

    Args:
        input: [N, 3, H, W] with H, W >= 11 - 2 * padding; float32, float16 or bfloat16; any
            strides (contiguous NCHW is the fast layout on CUDA; channels_last takes 1.1-1.5x
            its time, README "Speed").
        weight: [C_out, 3, 11, 11] with 1 <= C_out <= 256, same dtype and device as ``input``.
        bias: [C_out] or None.
        allow_tf32: keyword-only, as in the op's schema. On CUDA with float32, permit
            products rounded to TF32's 10-bit mantissa (relative norm error up to 1e-3
            instead of float32 accuracy): TF32 tensor cores, or on Hopper fp16 ones with
            range guards. No effect elsewhere.
        padding: keyword-only, 0 to 5 (zeros on every side). 2 is AlexNet as torchvision and
            KernelBench have it, 0 the original 227x227 AlexNet.
        relu: keyword-only: apply ``F.relu`` to the output inside the op, bit for bit as
            ``torch.relu`` on the output's device does (NaN stays NaN; -0.0 stays -0.0 on CPU
            and becomes +0.0 on CUDA); its gradient masks by the output, as relu's does.
            Alexconv's CUDA kernels fuse it into their epilogues.

    Alexconv's own CUDA kernels run every padding with 1 to 96 output channels (64 and 96
    among them); 97 to 256 take ATen's convolution on CUDA (under the same numerical contract).

    Returns:
        [N, C_out, (H + 2 * padding - 11) // 4 + 1, (W + 2 * padding - 11) // 4 + 1] in
        ``input``'s dtype, in the memory format ``F.conv2d`` would return. Differentiable: the
        backward is ATen's convolution backward. Under ``torch.autocast`` it runs in the
        autocast dtype.
    """
    return torch.ops.alexconv.conv1(input, weight, bias, allow_tf32=allow_tf32, padding=padding,
                                    relu=relu)


def conv1_kernel(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    allow_tf32: bool = False,
    padding: int = 2,
    relu: bool = False,
) -> str:
    """Which kernel :func:`conv1` runs for these arguments on their device. On CPU
    ``"cpu_avx512"``, ``"cpu_avx2"`` or ``"cpu_baseline"`` (alexconv's micro-kernel for that
    instruction set, following ATen's CPU capability), ``"cpu_avx512_bf16"`` (bfloat16 as
    pairs of taps through AVX512-BF16's dot products; ``"cpu_avx512_bf16_emulated"`` when that
    is forced on a CPU without them) or ``"aten"`` (ATen's convolution, only when forced);
    ``ALEXCONV_CPU_KERNEL=baseline|avx2|avx512|avx512_bf16|avx512_bf16_emulated|aten`` forces
    one (docs/perf-notes.md, "The CPU kernel"). On CUDA
    ``"wgmma"`` or ``"s2d"`` (Hopper), ``"s2d_mma_sync"`` or ``"mma_sync"`` / ``"mma_sync_n48"`` /
    ``"mma_sync_n24"`` (other tensor-core GPUs, sm_80 and up), ``"aten"``
    (ATen's cuDNN convolution, where none of alexconv's kernels can run the call: among
    others more than 96 output channels, GPUs below sm_80) or ``"direct"``;
    ``"none"`` for an empty output. ``ALEXCONV_CUDA_KERNEL`` and ``ALEXCONV_EMULATE_DEVICE``
    apply, as for the call itself (docs/architecture.md).
    """
    return torch.ops.alexconv.conv1_kernel(input, weight, bias, allow_tf32=allow_tf32,
                                           padding=padding, relu=relu)
