"""KernelBench level1/50's reference ``Model`` and alexconv's drop-in ``ModelNew``."""

from __future__ import annotations

import torch
import torch.nn as nn

batch_size = 256
num_classes = 1000


class Model(nn.Module):
    """The reference: AlexNet's first convolution as plain ``nn.Conv2d``."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels=3, out_channels=96, kernel_size=11, stride=4, padding=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv1(x)


class ModelNew(nn.Module):
    """Drop-in for :class:`Model` that runs ``torch.ops.alexconv.conv1``.

    Parameters live in an ``nn.Conv2d`` named ``conv1`` so that, under the same
    ``torch.manual_seed``, initialisation matches ``Model`` exactly and state_dicts
    load both ways. Works with ``torch.jit.script``, ``torch.compile`` and ``torch.export``,
    trains (gradients by ATen's convolution backward) and follows ``torch.autocast``.
    Unlike ``nn.Conv2d`` it takes batched [N, 3, H, W] float32, float16 or bfloat16
    input only (no float64, no unbatched [3, H, W]).
    """

    def __init__(self, num_classes: int = 1000, allow_tf32: bool = False):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels=3, out_channels=96, kernel_size=11, stride=4, padding=2)
        self.allow_tf32 = allow_tf32

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.alexconv.conv1(
            x, self.conv1.weight, self.conv1.bias, allow_tf32=self.allow_tf32
        )


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(batch_size, 3, 224, 224)]


def get_init_inputs() -> list[int]:
    return [num_classes]
