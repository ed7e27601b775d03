"""Save alexconv.ModelNew for C++: a TorchScript file (.pt) or an AOTInductor package (.pt2).

    alexconv-export model.pt [--state-dict weights.pt] [--allow-tf32]
        [--dtype float32|float16|bfloat16] [--seed 0]
    alexconv-export model.pt2 [--device cpu|cuda] [same options]

(also python -m alexconv.export). The output's suffix picks the route:
  .pt   torch.jit.script -> torch.jit.load / torch::jit::load (alexconv_demo). torch 1.13 and 2.x.
  .pt2  torch.export -> torch._inductor.aoti_compile_and_package -> a package for
        alexconv.load_package / torch._inductor.aoti_load_package (Python) or
        torch::inductor::AOTIModelPackageLoader (C++: alexconv_aoti_demo). Compiled for one
        device (--device) and for the torch release that compiles it; batch, height and width
        stay dynamic (height and width >= 11). Needs torch >= 2.6 and a C++ compiler that links
        the shared libstdc++ (libstdc++.so.6): where inductor's default compiler (CXX, else g++)
        does not, the export takes one here that does and says which.

--state-dict takes a state_dict saved from Model or ModelNew (same keys).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import zipfile
from typing import Callable

import torch

from . import _toolchain
from ._aoti import _quiet_torch, aoti_unsupported
from .models import ModelNew, get_init_inputs

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# Dynamic dimensions of the AOTInductor package. Height and width start at 11: from 7 to 10
# the output is 1 pixel wide, and torch.export specializes a size of 1 (the op itself takes
# them; the TorchScript route does too).
MIN_AOTI_SIZE = 11


def _model(state_dict: str | None, allow_tf32: bool, dtype: str, seed: int) -> ModelNew:
    torch.manual_seed(seed)
    model = ModelNew(*get_init_inputs(), allow_tf32=allow_tf32)
    if state_dict is not None:
        model.load_state_dict(torch.load(state_dict, map_location="cpu", weights_only=True))
    return model.to(DTYPES[dtype]).eval()


def export(path: str, state_dict: str | None = None, allow_tf32: bool = False,
           dtype: str = "float32", seed: int = 0) -> torch.jit.ScriptModule:
    with _quiet_torch():
        scripted = torch.jit.script(_model(state_dict, allow_tf32, dtype, seed))
        scripted.save(path)
    return scripted


def choose_compiler(say: Callable[[str], None] | None = None) -> str:
    """The C++ compiler for AOTInductor: inductor's own choice (CXX, else g++) where it links
    the shared libstdc++, else the first one here that does (alexconv._toolchain), said through
    `say`. Raises RuntimeError, naming the fix, only where no compiler here links it."""
    default = importlib.import_module("torch._inductor.cpp_builder").get_cpp_compiler()
    try:
        _toolchain.check_compiler_links_shared_libstdcxx(default)  # a second, not a failed load
        return default
    except RuntimeError as refused:
        found = _toolchain.find_compiler_linking_shared_libstdcxx(exclude=default)
        if found is None:
            raise
        if say is not None:
            first = str(refused).splitlines()[0]
            reason = ("links libstdc++ statically: its packages crash when they load"
                      if "without the shared libstdc++" in first else f"failed: {first}")
            say(f"note: inductor's compiler {default} {reason}; compiling with {found} "
                "instead (set CXX to choose another)")
        return found


def export_aoti(path: str, device: str = "cpu", state_dict: str | None = None,
                allow_tf32: bool = False, dtype: str = "float32", seed: int = 0,
                say: Callable[[str], None] | None = None) -> str:
    """torch.export of ModelNew on `device`, compiled by AOTInductor into the package `path`
    with :func:`choose_compiler`'s compiler; `say` gets its note where it passed one over."""
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
    from . import __version__
    compiler = choose_compiler(say)
    with torch.no_grad(), _quiet_torch():
        program = torch.export.export(model, (example,), dynamic_shapes={"x": dims})
    # alexconv_aoti_demo reads the dtype and allow_tf32 (its tolerance) from the package's metadata.
    configs = {"aot_inductor.metadata": {"alexconv.allow_tf32": str(int(allow_tf32)), "alexconv.dtype": dtype,
                                         "alexconv.version": __version__}}
    inductor = importlib.import_module("torch._inductor")
    with importlib.import_module("torch._inductor.config").patch({"cpp.cxx": (None, compiler)}), _quiet_torch():
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="alexconv-export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", help="where to write: .pt (TorchScript) or .pt2 (AOTInductor package)")
    parser.add_argument("--state-dict", help="state_dict file of Model or ModelNew to load")
    parser.add_argument("--allow-tf32", action="store_true", help="let the CUDA float32 path round products to TF32 precision (ops.conv1)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--seed", type=int, default=0, help="initialisation seed when no state_dict is given")
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        help="the .pt2 package's device (default cpu); a .pt file loads on either")
    args = parser.parse_args(argv)
    if args.output.endswith(".pt2"):
        # What export_aoti would raise for, said as a usage error; a failing compile keeps its traceback.
        if (reason := aoti_unsupported()) is not None:
            parser.exit(1, f"error: cannot build an AOTInductor package: {reason}\n")
        if args.device == "cuda" and not torch.cuda.is_available():
            parser.exit(1, "error: --device cuda but torch sees no CUDA device\n")
        try:
            export_aoti(args.output, args.device or "cpu", args.state_dict, args.allow_tf32, args.dtype,
                        args.seed, say=lambda text: print(text, file=sys.stderr, flush=True))
        except RuntimeError as e:
            if "libstdc++" not in str(e):
                raise  # a failing compile keeps its traceback
            parser.exit(1, f"error: {e}\n")
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
