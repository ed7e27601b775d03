"""The dispatch policy (op/cuda/dispatch.cpp): which kernel a call takes, natively and with the
dispatcher planning as other GPU classes (ALEXCONV_EMULATE_DEVICE), read through
alexconv.conv1_kernel. The variables are read once per process: each case runs in a child."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import alexconv
from conftest import CPU_KERNELS, child_env, requires_cuda

# What the child reports: the kernel per (dtype, allow_tf32, layout) at 224x224, batch 256 and
# batch 2, and whether the call meets the contract there.
_PROBE = textwrap.dedent("""
    import json, torch, alexconv
    from conftest import assert_matches_reference, make_input, make_weight
    out = {}
    for name, dtype, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                              ("fp16", torch.float16, False), ("bf16", torch.bfloat16, False)):
        for layout in ("contiguous", "channels_last"):
            for n in (2, 256):
                x = make_input(n, 224, 224, dtype, "cuda", layout)
                w, b = make_weight(dtype, "cuda")
                kernel = alexconv.conv1_kernel(x, w, b, allow_tf32=tf32)
                if n == 2:  # the contract, on whatever runs
                    assert_matches_reference(alexconv.conv1(x, w, b, allow_tf32=tf32), x, w, b, tf32)
                out[f"{name} {layout} {n}"] = kernel
    print(json.dumps(out))
""")


def probe(**env) -> dict:
    done = subprocess.run([sys.executable, "-c", _PROBE], env=child_env(**env), capture_output=True, text=True,
                          cwd=os.path.dirname(__file__), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_cpu_reports_a_cpu_path():
    x, w = torch.rand(1, 3, 11, 11), torch.rand(96, 3, 11, 11)
    assert alexconv.conv1_kernel(x, w) in CPU_KERNELS
    with pytest.raises(RuntimeError, match="weight must have shape"):
        alexconv.conv1_kernel(x, torch.rand(96, 3, 10, 11))


def test_conv1_kernel_takes_allow_tf32_by_keyword_only():
    x, w = torch.rand(1, 3, 11, 11), torch.rand(96, 3, 11, 11)
    with pytest.raises(TypeError):
        alexconv.conv1_kernel(x, w, None, True)


def _capability():
    return torch.cuda.get_device_capability() if torch.cuda.is_available() else (0, 0)


# The classes a Hopper card can plan as (none asks for more shared memory than it has), and the
# kernel each must get per (mode, layout, batch) at 224x224 (op/cuda/dispatch.cpp): at batch 256
# every mode and layout takes the portable space-to-depth kernel (s2d_mma_sync) on every sm_80+
# class -- float32 accurate as bf16x3, allow_tf32 as float16 words, NCHW 16-bit inputs as column
# pairs (on the A100, whose register gather holds every channel, from 32 tiles per SM: batch 256
# is 33 on 132 SMs); at batch 2 the register gather's mma.sync engine in the widest fit the
# class's shared memory takes (float32 on the A100 over two CTAs, on the 99 KB parts over four;
# allow_tf32 there in the float32-accurate fit: at up to 128 output pixels per SM it is faster);
# ATen's cuDNN convolution below sm_80; never the direct kernel, never a Hopper kernel on another
# class.
def _auto(fp32: str, resident_16bit: bool):
    def kernel(key: str) -> str:
        mode, layout, batch = key.split()
        if batch != "2":
            return "s2d_mma_sync"
        if mode in ("fp32", "tf32"):
            return fp32
        return "mma_sync" if resident_16bit else "mma_sync_n48"
    return kernel


_AUTO_99KB = _auto("mma_sync_n24", resident_16bit=False)
# The narrowest register-gather split of each dtype (ALEXCONV_CUDA_KERNEL=mma_sync_split): 16
# bits and TF32 (as float16 words) over two CTAs, float32 and TF32 words over four.
_NARROWEST_SPLIT = {"fp32": "mma_sync_n24", "tf32": "mma_sync_n24", "fp16": "mma_sync_n48", "bf16": "mma_sync_n48"}
EMULATED = {
    "8.0": _auto("mma_sync_n48", resident_16bit=True),
    "8.6": _AUTO_99KB,
    "8.9": _AUTO_99KB,
    "12.0": _AUTO_99KB,
    "7.5": lambda key: "aten",
}


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("cc", list(EMULATED))
def test_emulated_gpu_classes_get_their_kernels(cc):
    if _capability() != (9, 0):
        pytest.skip("the emulated classes' expectations are written for a Hopper card")
    got = probe(ALEXCONV_EMULATE_DEVICE=cc)
    for key, kernel in got.items():
        assert kernel == EMULATED[cc](key), (cc, key, kernel)


@requires_cuda
@pytest.mark.cuda
def test_native_hopper_never_takes_aten_or_direct():
    if _capability() != (9, 0):
        pytest.skip("Hopper's table")
    got = probe()
    assert set(got.values()) <= {"wgmma", "s2d"}, got
    assert got["fp32 contiguous 256"] == "wgmma" and got["fp16 contiguous 256"] == "s2d", got


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("value, message", [
    ("sm_86", "must be a compute capability"),
    ("8.6:", "must be a compute capability"),
    ("6.1", "no known shared-memory size"),
    ("9.0:999999999", "asks for 999999999 bytes"),
])
def test_bad_emulation_values_are_named(value, message):
    code = ("import torch, alexconv\n"
            "x = torch.rand(1, 3, 224, 224, device='cuda'); w = torch.rand(96, 3, 11, 11, device='cuda')\n"
            "alexconv.conv1(x, w)\n")
    done = subprocess.run([sys.executable, "-c", code], env=child_env(ALEXCONV_EMULATE_DEVICE=value),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and message in done.stderr and "ALEXCONV_EMULATE_DEVICE" in done.stderr, done.stderr[-2000:]


@requires_cuda
@pytest.mark.cuda
def test_forced_aten_path_meets_the_contract():
    got = probe(ALEXCONV_CUDA_KERNEL="aten")
    assert set(got.values()) == {"aten"}, got


@requires_cuda
@pytest.mark.cuda
def test_forced_split_takes_the_narrowest_fit_of_each_dtype():
    got = probe(ALEXCONV_CUDA_KERNEL="mma_sync_split")
    for key, kernel in got.items():
        assert kernel == _NARROWEST_SPLIT[key.split()[0]], (key, kernel)


@requires_cuda
@pytest.mark.cuda
def test_forced_portable_s2d_runs_every_mode():
    forced = probe(ALEXCONV_CUDA_KERNEL="s2d_mma_sync")
    assert set(forced.values()) == {"s2d_mma_sync"}, forced
