"""Script alexconv.ModelNew and save it for torch.jit.load / torch::jit::load.

    python scripts/export_model.py model.pt [--state-dict weights.pt] [--allow-tf32]
        [--dtype float32|float16|bfloat16] [--seed 0]

--state-dict takes a state_dict saved from Model or ModelNew (same keys).
"""

from __future__ import annotations

import argparse

import torch

import alexconv

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def export(path: str, state_dict: str | None = None, allow_tf32: bool = False,
           dtype: str = "float32", seed: int = 0) -> torch.jit.ScriptModule:
    torch.manual_seed(seed)
    model = alexconv.ModelNew(*alexconv.get_init_inputs(), allow_tf32=allow_tf32)
    if state_dict is not None:
        model.load_state_dict(torch.load(state_dict, map_location="cpu", weights_only=True))
    scripted = torch.jit.script(model.to(DTYPES[dtype]).eval())
    scripted.save(path)
    return scripted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", help="where to write the scripted model (.pt)")
    parser.add_argument("--state-dict", help="state_dict file of Model or ModelNew to load")
    parser.add_argument("--allow-tf32", action="store_true", help="let the CUDA float32 path round products to TF32 precision (ops.conv1)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--seed", type=int, default=0, help="initialisation seed when no state_dict is given")
    args = parser.parse_args()
    export(args.output, args.state_dict, args.allow_tf32, args.dtype, args.seed)
    print(f"saved scripted ModelNew ({args.dtype}, allow_tf32={args.allow_tf32}) to {args.output}")


if __name__ == "__main__":
    main()
