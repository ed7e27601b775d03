"""Save alexconv.ModelNew for C++: a TorchScript file (.pt) or an AOTInductor package (.pt2).

    python scripts/export_model.py model.pt [--state-dict weights.pt] [--allow-tf32]
        [--dtype float32|float16|bfloat16] [--seed 0]
    python scripts/export_model.py model.pt2 [--device cpu|cuda] [same options]

The output's suffix picks the route:
  .pt   torch.jit.script -> torch.jit.load / torch::jit::load (alexconv_demo). torch 1.13 and 2.x.
  .pt2  torch.export -> torch._inductor.aoti_compile_and_package -> a package for
        torch._inductor.aoti_load_package / torch::inductor::AOTIModelPackageLoader
        (alexconv_aoti_demo). Compiled for one device (--device) and for the torch release
        that compiles it; batch, height and width stay dynamic (height and width >= 11).
        Needs a C++ compiler here, and torch >= 2.6 (aoti_unsupported() says what is missing).

--state-dict takes a state_dict saved from Model or ModelNew (same keys).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import tempfile
import zipfile

import torch

import alexconv
from alexconv import _toolchain

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# Dynamic dimensions of the AOTInductor package. Height and width start at 11: from 7 to 10
# the output is 1 pixel wide, and torch.export specializes a size of 1 (the op itself takes
# them; the TorchScript route does too).
MIN_AOTI_SIZE = 11


def _model(state_dict: str | None, allow_tf32: bool, dtype: str, seed: int) -> alexconv.ModelNew:
    torch.manual_seed(seed)
    model = alexconv.ModelNew(*alexconv.get_init_inputs(), allow_tf32=allow_tf32)
    if state_dict is not None:
        model.load_state_dict(torch.load(state_dict, map_location="cpu", weights_only=True))
    return model.to(DTYPES[dtype]).eval()


def export(path: str, state_dict: str | None = None, allow_tf32: bool = False,
           dtype: str = "float32", seed: int = 0) -> torch.jit.ScriptModule:
    scripted = torch.jit.script(_model(state_dict, allow_tf32, dtype, seed))
    scripted.save(path)
    return scripted


def aoti_unsupported() -> str | None:
    """Why this torch cannot build the AOTInductor package, or None when it can.

    Checked by capability: torch.export, aoti_compile_and_package taking the program alone
    (2.5's form also wanted its example inputs), and the package metadata that carries
    allow_tf32 to C++ (aot_inductor.metadata); all three are in torch 2.6 and later."""
    if not hasattr(torch, "export") or not hasattr(torch.export, "Dim"):
        return f"torch {torch.__version__} has no torch.export (AOTInductor packages need torch >= 2.6)"
    try:
        inductor = importlib.import_module("torch._inductor")
        inductor_config = importlib.import_module("torch._inductor.config")
    except ImportError as e:
        return f"torch {torch.__version__} has no usable inductor ({e})"
    compile_and_package = getattr(inductor, "aoti_compile_and_package", None)
    if compile_and_package is None:
        return f"torch {torch.__version__} has no torch._inductor.aoti_compile_and_package (needs torch >= 2.6)"
    params = inspect.signature(compile_and_package).parameters
    if any(p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD
           for name, p in params.items() if name != "exported_program"):
        return (f"torch {torch.__version__}'s aoti_compile_and_package is the 2.5 form "
                "(example inputs required); alexconv's package needs torch >= 2.6")
    if not hasattr(inductor_config.aot_inductor, "metadata"):
        return f"torch {torch.__version__} has no aot_inductor.metadata (needs torch >= 2.6)"
    return None


def export_aoti(path: str, device: str = "cpu", state_dict: str | None = None,
                allow_tf32: bool = False, dtype: str = "float32", seed: int = 0) -> str:
    """torch.export of ModelNew on `device`, compiled by AOTInductor into the package `path`."""
    reason = aoti_unsupported()
    if reason is not None:
        raise RuntimeError(f"cannot build an AOTInductor package: {reason}")
    if not path.endswith(".pt2"):
        raise ValueError(f"an AOTInductor package's name must end in .pt2, got {path}")
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda but torch sees no CUDA device: a CUDA package is "
                           "compiled on a machine with the GPU")
    model = _model(state_dict, allow_tf32, dtype, seed).to(device)
    # Fresh random example input, on the package's device: export traces the Meta kernel,
    # AOTInductor compiles the wrapper for that device.
    example = torch.rand(2, 3, 64, 64, device=device, dtype=DTYPES[dtype])
    dims = {0: torch.export.Dim("batch", min=1),
            2: torch.export.Dim("height", min=MIN_AOTI_SIZE),
            3: torch.export.Dim("width", min=MIN_AOTI_SIZE)}
    with torch.no_grad():
        program = torch.export.export(model, (example,), dynamic_shapes={"x": dims})
    # alexconv_aoti_demo reads the dtype and allow_tf32 (its tolerance) from the package's metadata.
    configs = {"aot_inductor.metadata": {"alexconv.allow_tf32": str(int(allow_tf32)), "alexconv.dtype": dtype,
                                         "alexconv.version": alexconv.__version__}}
    inductor = importlib.import_module("torch._inductor")
    compiler = importlib.import_module("torch._inductor.cpp_builder").get_cpp_compiler()
    _toolchain.check_compiler_links_shared_libstdcxx(compiler)  # fail in a second, not at load
    package = inductor.aoti_compile_and_package(program, package_path=path, inductor_configs=configs)
    _check_package_libraries(package, compiler)
    return package


def _check_package_libraries(package: str, compiler: str) -> None:
    """Every shared object in the package must use the shared libstdc++ (alexconv._toolchain);
    a package that would crash its loader is removed, with the reason raised."""
    with zipfile.ZipFile(package) as archive, tempfile.TemporaryDirectory() as tmp:
        for name in archive.namelist():
            if name.endswith(".so") and not _toolchain.links_shared_libstdcxx(archive.extract(name, tmp)):
                os.remove(package)
                raise RuntimeError(_toolchain.static_libstdcxx_error(compiler, f"the package's {name}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", help="where to write: .pt (TorchScript) or .pt2 (AOTInductor package)")
    parser.add_argument("--state-dict", help="state_dict file of Model or ModelNew to load")
    parser.add_argument("--allow-tf32", action="store_true", help="let the CUDA float32 path round products to TF32 precision (ops.conv1)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--seed", type=int, default=0, help="initialisation seed when no state_dict is given")
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        help="the .pt2 package's device (default cpu); a .pt file loads on either")
    args = parser.parse_args()
    if args.output.endswith(".pt2"):
        # What export_aoti would raise for, said as a usage error; a failing compile keeps its traceback.
        if (reason := aoti_unsupported()) is not None:
            parser.exit(1, f"error: cannot build an AOTInductor package: {reason}\n")
        if args.device == "cuda" and not torch.cuda.is_available():
            parser.exit(1, "error: --device cuda but torch sees no CUDA device\n")
        export_aoti(args.output, args.device or "cpu", args.state_dict, args.allow_tf32, args.dtype, args.seed)
        print(f"saved AOTInductor package of ModelNew ({args.device or 'cpu'}, {args.dtype}, "
              f"allow_tf32={args.allow_tf32}) to {args.output}")
        return
    if args.device is not None:
        parser.error("--device is for .pt2 packages; a TorchScript file loads on either device "
                     "(alexconv_demo --device)")
    export(args.output, args.state_dict, args.allow_tf32, args.dtype, args.seed)
    print(f"saved scripted ModelNew ({args.dtype}, allow_tf32={args.allow_tf32}) to {args.output}")


if __name__ == "__main__":
    main()
