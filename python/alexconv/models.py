"""KernelBench level1/50's reference ``Model`` and alexconv's drop-in ``ModelNew``."""

from __future__ import annotations

import torch
import torch.nn as nn

batch_size = 256
num_classes = 1000


class Model(nn.Module):
    """The reference: AlexNet's first convolution as plain ``nn.Conv2d``.

    Being ``nn.Conv2d``, it also takes what :class:`ModelNew` rejects: unbatched
    [3, H, W] input and float64. On CUDA it follows ``torch.backends.cudnn.allow_tf32``,
    which PyTorch leaves True: cuDNN may then pick a TF32 kernel. Measured on an H200
    (torch 2.11, cuDNN 9.19) it does from batch 256: max |error| against float64 5.9e-4,
    against 1.7e-6 with the flag False (alexconv's default path: 1.4e-5). So a
    KernelBench-style ``allclose(Model(x), ModelNew(x), atol=1e-4, rtol=1e-4)`` can fail
    at batch 256 with this model the less accurate side; set
    ``torch.backends.cudnn.allow_tf32 = False`` before comparing.
    """

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels=3, out_channels=96, kernel_size=11, stride=4, padding=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv1(x)


class ModelNew(nn.Module):
    """Drop-in for :class:`Model` that runs ``torch.ops.alexconv.conv1``.

    Parameters live in an ``nn.Conv2d`` named ``conv1`` so that, under the same
    ``torch.manual_seed``, initialisation matches ``Model`` exactly and state_dicts
    load both ways. Works with ``torch.jit.script``, ``torch.compile`` and ``torch.export``
    (the last two where torch has them: 2.x, see ``alexconv._compat``), trains (gradients by ATen's convolution backward) and follows ``torch.autocast``.

    What differs from :class:`Model`:

    - input: batched [N, 3, H, W] float32, float16 or bfloat16 only; no float64 and no
      unbatched [3, H, W] (add the batch dimension: ``x.unsqueeze(0)``).
    - TF32: ``torch.backends.cudnn.allow_tf32`` (True by default) does not change the
      forward; only ``allow_tf32=True`` lets the float32 CUDA kernels round to TF32.
      ``Model`` on CUDA does follow that flag and may itself run in TF32 (from batch
      256 on an H200, see :class:`Model`): compare the two with the flag False.
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
