"""alexconv: AlexNet's first convolution as a PyTorch custom operator.

``import alexconv`` loads ``libalexconv.so``, which registers
``torch.ops.alexconv.conv1`` (CPU and Meta kernels, and a CUDA one where the
library was built with CUDA). The operator computes
``F.conv2d(input, weight, bias, stride=4, padding=padding)`` (padding 0-5, default 2), then
``F.relu`` where ``relu=True``, for input [N, 3, H, W] and weight [C_out, 3, 11, 11] with
1 <= C_out <= 256. ``AlexConv2d`` is that layer as a module, and ``convert(model)`` swaps it
into whole models (torchvision's AlexNet and the original one). ``load_package(path)`` loads an
AOTInductor package that calls the op (``alexconv-export model.pt2`` writes one).
"""

from ._library import cmake_prefix_path, library_path, load_library

load_library()

from ._build_info import VERSION as __version__  # noqa: E402  (pyproject.toml's, through CMake)
from .convert import ConversionReport, convert  # noqa: E402
from ._aoti import load_package  # noqa: E402
from .models import Model, ModelNew, get_init_inputs, get_inputs  # noqa: E402
from .modules import AlexConv2d  # noqa: E402
from .ops import conv1, conv1_kernel  # noqa: E402
from .onnx_export import onnx_translation_table, register as _register_onnx  # noqa: E402

_register_onnx()  # torch.onnx.export writes the op as ONNX Conv (+ Relu): docs/deployment.md

__all__ = ["conv1", "conv1_kernel", "AlexConv2d", "convert", "ConversionReport", "Model", "ModelNew",
           "get_inputs", "get_init_inputs", "library_path", "cmake_prefix_path", "load_package",
           "onnx_translation_table"]
