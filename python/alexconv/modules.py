"""``AlexConv2d``: the op as an ``nn.Module`` with ``nn.Conv2d``'s parameters, attributes and
initialisation, optionally with the following ReLU fused in."""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn as nn

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_OUT_CHANNELS = 256
MAX_PADDING = 5


def _pair(value, name: str) -> tuple[int, int]:
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(pair) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair):
        raise ValueError(f"AlexConv2d: {name} must be an int or a pair of ints, got {value!r}")
    return pair


def padding_of(padding) -> int:
    """The one padding of a supported layer's ``padding`` argument ('valid', an int or a pair)."""
    return 0 if padding == "valid" else _pair(padding, "padding")[0]


def unsupported_reasons(in_channels, out_channels, kernel_size, stride, padding, dilation=1,
                        groups=1, padding_mode="zeros") -> list[str]:
    """Every reason ``nn.Conv2d`` with these arguments is not a layer the op runs (empty where
    it is one)."""
    reasons = []
    if padding == "valid":
        padding = 0
    if in_channels != 3:
        reasons.append(f"in_channels must be 3, got {in_channels}")
    if not 1 <= out_channels <= MAX_OUT_CHANNELS:
        reasons.append(f"out_channels must be in [1, {MAX_OUT_CHANNELS}], got {out_channels}")
    checks = [("kernel_size", kernel_size, 11), ("stride", stride, 4), ("dilation", dilation, 1)]
    for name, value, want in checks:
        if _pair(value, name) != (want, want):
            reasons.append(f"{name} must be {want}, got {value!r}")
    if isinstance(padding, str):
        reasons.append(f"padding must be an int in [0, {MAX_PADDING}] or 'valid', got {padding!r}")
    else:
        pad = _pair(padding, "padding")
        if pad[0] != pad[1] or not 0 <= pad[0] <= MAX_PADDING:
            reasons.append(f"padding must be the same int in [0, {MAX_PADDING}] on both axes, got {padding!r}")
    if groups != 1:
        reasons.append(f"groups must be 1, got {groups}")
    if padding_mode != "zeros":
        reasons.append(f"padding_mode must be 'zeros', got {padding_mode!r}")
    return reasons


def unsupported_reason(in_channels, out_channels, kernel_size, stride, padding, dilation=1,
                       groups=1, padding_mode="zeros") -> Optional[str]:
    """Why ``nn.Conv2d`` with these arguments is not a layer the op runs (the first reason of
    :func:`unsupported_reasons`), or None where it is."""
    reasons = unsupported_reasons(in_channels, out_channels, kernel_size, stride, padding,
                                  dilation, groups, padding_mode)
    return reasons[0] if reasons else None


class AlexConv2d(nn.Module):
    """``nn.Conv2d(3, out_channels, 11, stride=4, padding=padding)``, then ``nn.ReLU`` where
    ``relu`` is set, in one call of ``alexconv.conv1``.

    Takes ``nn.Conv2d``'s arguments (only the values the op runs: 3 input channels, kernel 11,
    stride 4, 1 to 256 output channels, padding 0 to 5), so that ``nn.Conv2d(3, 64, 11, 4, 2)``
    becomes ``AlexConv2d(3, 64, 11, 4, 2)``. It has ``nn.Conv2d``'s parameter names (state_dicts
    load both ways), attributes and initialisation (equal weights under the same seed). Not a
    subclass of ``nn.Conv2d`` on purpose: tools that rewrite ``nn.Conv2d`` modules (BatchNorm
    folding, quantisation) would silently drop the fused relu.

    ``allow_tf32``: see :func:`alexconv.conv1`. :func:`alexconv.convert` swaps these into whole
    models; :meth:`from_conv2d` makes one that shares an ``nn.Conv2d``'s parameters.
    """

    # TorchScript: bias is a Tensor or None (as in nn.Conv2d).
    __annotations__ = {"bias": Optional[torch.Tensor]}

    def __init__(self, in_channels: int = 3, out_channels: int = 96, kernel_size=11, stride=4,
                 padding=2, dilation=1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", *, relu: bool = False, allow_tf32: bool = False,
                 device=None, dtype=None):
        super().__init__()
        reason = unsupported_reason(in_channels, out_channels, kernel_size, stride, padding,
                                    dilation, groups, padding_mode)
        if reason is not None:
            raise ValueError(f"AlexConv2d: {reason}")
        pad = padding_of(padding)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = (11, 11)
        self.stride = (4, 4)
        self.padding = (pad, pad)
        self.dilation = (1, 1)
        self.groups = 1
        self.padding_mode = "zeros"
        self.relu = bool(relu)
        self.allow_tf32 = bool(allow_tf32)
        factory = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, 11, 11, **factory))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_channels, **factory))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """nn.Conv2d's initialisation, in its order (the same draws from the same seed)."""
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_channels * 11 * 11)
            nn.init.uniform_(self.bias, -bound, bound)

    @classmethod
    def from_conv2d(cls, conv: nn.Conv2d, *, relu: bool = False,
                    allow_tf32: bool = False) -> "AlexConv2d":
        """An AlexConv2d holding ``conv``'s own parameter objects (not copies): training either
        trains both, and ``state_dict`` keys and values stay as they were."""
        reason = unsupported_reason(conv.in_channels, conv.out_channels, conv.kernel_size,
                                    conv.stride, conv.padding, conv.dilation, conv.groups,
                                    conv.padding_mode)
        if reason is not None:
            raise ValueError(f"AlexConv2d.from_conv2d: {reason}")
        module = cls(conv.in_channels, conv.out_channels, padding=conv.padding,
                     bias=conv.bias is not None, relu=relu, allow_tf32=allow_tf32,
                     device="meta")  # placeholders, replaced below: no initialisation cost
        module.weight = conv.weight
        if conv.bias is not None:
            module.bias = conv.bias
        module.train(conv.training)
        return module

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return torch.ops.alexconv.conv1(input, self.weight, self.bias, allow_tf32=self.allow_tf32,
                                        padding=self.padding[0], relu=self.relu)

    def extra_repr(self) -> str:
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")
        if self.bias is None:
            text += ", bias=False"
        if self.relu:
            text += ", relu=True"
        if self.allow_tf32:
            text += ", allow_tf32=True"
        return text
