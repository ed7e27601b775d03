"""The Python face of ``torch.ops.alexconv.conv1``."""

from __future__ import annotations

import torch


def conv1(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    allow_tf32: bool = False,
) -> torch.Tensor:
    """``F.conv2d(input, weight, bias, stride=4, padding=2)`` through alexconv's kernels.

    Args:
        input: [N, 3, H, W] with H, W >= 7; float32, float16 or bfloat16; any strides
            (contiguous NCHW is the fast layout on CUDA; channels_last takes 1.1-1.5x
            its time, README "Speed").
        weight: [96, 3, 11, 11], same dtype and device as ``input``.
        bias: [96] or None.
        allow_tf32: keyword-only, as in the op's schema. On CUDA with float32, permit
            products rounded to TF32's 10-bit mantissa (relative norm error up to 1e-3
            instead of float32 accuracy): TF32 tensor cores, or on Hopper fp16 ones with
            range guards. No effect elsewhere.

    Returns:
        [N, 96, (H - 7) // 4 + 1, (W - 7) // 4 + 1] in ``input``'s dtype, in the memory
        format ``F.conv2d`` would return. Differentiable: the backward is ATen's
        convolution backward. Under ``torch.autocast`` it runs in the autocast dtype.
    """
    return torch.ops.alexconv.conv1(input, weight, bias, allow_tf32=allow_tf32)


def conv1_kernel(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    allow_tf32: bool = False,
) -> str:
    """Which kernel :func:`conv1` runs for these arguments on their device: ``"cpu"``; on CUDA
    ``"wgmma"`` or ``"s2d"`` (Hopper), ``"mma_sync"`` (other tensor-core GPUs), ``"aten"``
    (ATen's cuDNN convolution, where none of alexconv's kernels can run the call) or
    ``"direct"``; ``"none"`` for an empty output. ``ALEXCONV_CUDA_KERNEL`` and
    ``ALEXCONV_EMULATE_DEVICE`` apply, as for the call itself (docs/architecture.md).
    """
    return torch.ops.alexconv.conv1_kernel(input, weight, bias, allow_tf32=allow_tf32)
