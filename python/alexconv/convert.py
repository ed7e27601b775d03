"""``alexconv.convert``: swaps the op into whole models (torchvision's AlexNet, the original
96-channel one, anything holding such a layer)."""

from __future__ import annotations

import copy
import dataclasses
import logging
import warnings

import torch
import torch.nn as nn

from .modules import _DTYPES, AlexConv2d, padding_of, unsupported_reasons
from .ops import conv1_kernel

logger = logging.getLogger("alexconv")


# The input alexconv.conv1_kernel is asked about: which kernel runs a layer depends on its
# device, dtype and geometry (and on the batch and image size, between kernels of ours).
PROBE_SHAPE = (1, 3, 224, 224)


@dataclasses.dataclass(frozen=True)
class Replacement:
    name: str  # the nn.Conv2d's qualified name (state_dict prefix), now an AlexConv2d
    conv: str  # what it was (its repr)
    relu: str | None  # the nn.ReLU fused into it, now nn.Identity, or None
    # The kernel the op takes for it on its device (alexconv.conv1_kernel) for a batch of one
    # 224x224 image; None on the meta device.
    kernel: str | None = None

    def __str__(self) -> str:
        fused = f" + {self.relu} (ReLU fused; nn.Identity there now)" if self.relu else ""
        kernel = f" -> {self.kernel} (batch 1, 224x224)" if self.kernel else ""
        return f"{self.name}: {self.conv}{fused}{kernel}"


@dataclasses.dataclass(frozen=True)
class Skipped:
    name: str
    reasons: tuple[str, ...]  # every reason it was kept, not only the first

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    def __str__(self) -> str:
        return f"{self.name}: kept as nn.Conv2d ({self.reason})"


@dataclasses.dataclass
class ConversionReport:
    replaced: list[Replacement] = dataclasses.field(default_factory=list)
    skipped: list[Skipped] = dataclasses.field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"alexconv.convert: replaced {len(self.replaced)} nn.Conv2d, "
                 f"fused {sum(r.relu is not None for r in self.replaced)} ReLU, "
                 f"kept {len(self.skipped)} nn.Conv2d"]
        lines += [f"  {item}" for item in [*self.replaced, *self.skipped]]
        return "\n".join(lines)


def _has_hooks(module: nn.Module) -> bool:
    hooks = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
    return any(getattr(module, name, None) for name in hooks)


def _why_not(conv: nn.Module) -> tuple[str, ...]:
    """Every reason this nn.Conv2d stays (empty: it can be replaced)."""
    reasons = []
    if nn.utils.parametrize.is_parametrized(conv):  # (its class is a generated subclass)
        reasons.append("its parameters are parametrized (weight_norm, ...): a replacement would not run that")
    elif type(conv) is not nn.Conv2d:
        reasons.append(f"{type(conv).__name__} is a subclass of nn.Conv2d: its forward may differ")
    if _has_hooks(conv):
        reasons.append("it has hooks, which a replacement would not run")
    reasons += unsupported_reasons(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride,
                                   conv.padding, conv.dilation, conv.groups, conv.padding_mode)
    weight = conv.weight
    if weight.dtype not in _DTYPES:
        reasons.append(f"dtype must be float32, float16 or bfloat16, got {weight.dtype}")
    if weight.device.type == "cuda" and not torch._C._dispatch_has_kernel_for_dispatch_key(
            "alexconv::conv1", "CUDA"):
        reasons.append("it is on CUDA and this alexconv build has no CUDA kernel")
    if weight.device.type not in ("cpu", "cuda", "meta"):
        reasons.append(f"device must be cpu or cuda, got {weight.device}")
    return tuple(reasons)


def _kernel(conv: nn.Conv2d, allow_tf32: bool, relu: bool) -> str | None:
    """The kernel alexconv's op runs this layer with on its device (None on the meta device).
    conv1_kernel reads the input's shape, strides and alignment, never its values."""
    weight = conv.weight
    if weight.device.type == "meta":
        return None
    probe = torch.empty(PROBE_SHAPE, dtype=weight.dtype, device=weight.device)
    bias = None if conv.bias is None else conv.bias.detach()
    return conv1_kernel(probe, weight.detach(), bias, allow_tf32=allow_tf32,
                        padding=padding_of(conv.padding), relu=relu)


class _Converter:
    def __init__(self, allow_tf32: bool):
        self.allow_tf32 = allow_tf32
        self.report = ConversionReport()
        # A conv shared by several parents gets one replacement per relu setting, all holding
        # its parameters.
        self.made: dict[tuple[int, bool], AlexConv2d] = {}

    def replacement(self, conv: nn.Conv2d, relu: bool) -> AlexConv2d:
        key = (id(conv), relu)
        if key not in self.made:
            self.made[key] = AlexConv2d.from_conv2d(conv, relu=relu, allow_tf32=self.allow_tf32)
        return self.made[key]

    def walk(self, module: nn.Module, prefix: str) -> None:
        children = list(module._modules.items())
        # Fusion only where the order of children is the order of calls: nn.Sequential itself.
        sequential = type(module) is nn.Sequential
        for i, (name, child) in enumerate(children):
            qualified = f"{prefix}{name}"
            if child is None:
                continue
            if isinstance(child, torch.jit.ScriptModule):
                self.report.skipped.append(Skipped(qualified, ("inside a TorchScript module",)))
                continue
            if not isinstance(child, nn.Conv2d):
                self.walk(child, qualified + ".")
                continue
            after = children[i + 1] if sequential and i + 1 < len(children) else None
            fuse = after is not None and type(after[1]) is nn.ReLU and not _has_hooks(after[1])
            kernel, reasons = self.verdict(child, fuse)
            if reasons:
                self.report.skipped.append(Skipped(qualified, reasons))
                continue
            module._modules[name] = self.replacement(child, fuse)
            if fuse:
                module._modules[after[0]] = nn.Identity()
            self.report.replaced.append(Replacement(qualified, repr(child),
                                                    f"{prefix}{after[0]}" if fuse else None, kernel))

    def verdict(self, conv: nn.Module, relu: bool) -> tuple[str | None, tuple[str, ...]]:
        """The kernel the op would run the layer with, and every reason to keep it instead:
        where the op itself would call ATen's convolution (a GPU or a geometry alexconv's
        kernels do not cover), nn.Conv2d already does that without the op's extra pass."""
        reasons = _why_not(conv)
        if reasons:
            return None, reasons
        kernel = _kernel(conv, self.allow_tf32, relu)
        if kernel == "aten":
            return kernel, (f"on {conv.weight.device} alexconv's kernels do not run it (padding "
                            f"{padding_of(conv.padding)}, {conv.out_channels} output channels, "
                            f"{str(conv.weight.dtype).replace('torch.', '')}): the op would call "
                            "ATen's convolution, as nn.Conv2d does, and be no faster",)
        return kernel, ()


def convert(model: nn.Module, *, allow_tf32: bool = False,
            inplace: bool = False) -> tuple[nn.Module, ConversionReport]:
    """Replaces every ``nn.Conv2d`` of ``model`` that alexconv's op runs (3 input channels,
    kernel 11, stride 4, 1-256 output channels, padding 0-5 equal on both axes, dilation 1,
    groups 1, zeros padding, float32/float16/bfloat16) by an :class:`AlexConv2d` holding the
    same parameter objects, so that ``state_dict`` keys and values are unchanged and pretrained
    weights load before or after. An ``nn.ReLU`` directly after such a conv in an
    ``nn.Sequential`` is fused into it and replaced by ``nn.Identity`` (indices and keys stay).

    Returns ``(model, report)``: the converted model (a deep copy unless ``inplace``: then the
    replacements hold the copy's parameters, not the given model's) and a
    :class:`ConversionReport` of what was replaced (with the kernel the op takes for it on the
    model's device, ``alexconv.conv1_kernel`` for one 224x224 image) and which ``nn.Conv2d`` were
    kept, each with every reason, also logged to the ``alexconv`` logger at INFO level. A layer
    for which the op would call ATen's convolution itself (a GPU below sm_80, or a geometry
    alexconv's CUDA kernels do not cover) stays ``nn.Conv2d``: converting it would only add the
    op's own overhead. Where nothing was
    replaced it warns (``UserWarning``), saying why.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"alexconv.convert: model must be an nn.Module, got {type(model).__name__}")
    if isinstance(model, torch.jit.ScriptModule):
        raise TypeError("alexconv.convert: model is a TorchScript module; convert the eager "
                        "model, then script it")
    if not inplace:
        model = copy.deepcopy(model)
    converter = _Converter(allow_tf32)
    if isinstance(model, nn.Conv2d):  # the model is the layer itself: no parent to set
        kernel, reasons = converter.verdict(model, False)
        if not reasons:
            converter.report.replaced.append(Replacement("", repr(model), None, kernel))
            model = converter.replacement(model, False)
        else:
            converter.report.skipped.append(Skipped("", reasons))
    else:
        converter.walk(model, "")
    logger.info("%s", converter.report)
    if not converter.report.replaced:
        warnings.warn(_nothing_converted(model, converter.report), UserWarning, stacklevel=2)
    return model, converter.report


def _nothing_converted(model: nn.Module, report: ConversionReport) -> str:
    """The warning for a model in which convert replaced nothing: why, and what to do."""
    already = sum(isinstance(m, AlexConv2d) for m in model.modules())
    if report.skipped:
        why = (f"none of its {len(report.skipped)} nn.Conv2d can run on alexconv::conv1 "
               "(print the report for each one's reasons); the op takes 3 input channels, kernel 11, "
               "stride 4, 1-256 output channels, padding 0-5")
    else:
        why = "it holds no nn.Conv2d"
    if already:
        why += f" (it already holds {already} alexconv.AlexConv2d: converted before?)"
    return f"alexconv.convert replaced nothing: {why}; the model runs as it was"
