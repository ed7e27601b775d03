"""Index math past 32 bits, and running out of memory cleanly.

A 32-bit overflow in the kernels' offset arithmetic shows only when an offset passes 2**31
elements. There are two kinds of offsets, tested separately and honestly:

* input offsets (n*stride_n + c*stride_c + ...): `test_input_offsets_beyond_32_bits` views a
  huge, mostly untouched storage with strides that put image 1 past 2**31 elements and
  channel 2 of image 1 past 2**32, within one image too (2*stride_c > 2**31). On CPU the
  storage is virtual memory (Linux commits only the pages written: ~0.4 MB), so this runs
  in milliseconds; on CUDA it really allocates ~8.6 GB.
* output offsets: the op allocates its output, so more than 2**31 output elements means
  really computing and storing them. On CPU (slow) an expanded zero-stride input of one
  image at batch 7400 (2.15e9 outputs, 4.3 GB in float16) makes every output image equal
  to the first, so *every* element is checked bitwise against image 0, which is checked
  against the float64 reference. (An expanded input cannot catch input-offset bugs: its
  batch stride is 0; the test above covers those.) On CUDA (slow) batch 8192 of distinct
  224x224 images (2.38e9 outputs) is checked image by image against the reference.
"""

from __future__ import annotations

import os

import pytest
import torch

import alexconv
from conftest import (
    assert_matches_reference,
    conv1,
    device_params,
    make_input,
    make_weight,
    requires_cuda,
)

GB = 2**30
OUT_PER_224 = 96 * 55 * 55  # output elements of one 224x224 image


def skip_unless_ci(reason):
    """These are CPU CI's only checks of 64-bit offsets: there a machine that cannot run
    them fails the run instead of passing it quietly."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: this check must run)")
    pytest.skip(reason)


def cuda_free_bytes():
    return torch.cuda.mem_get_info()[0]


def cpu_available_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def huge_strided_input(device, dtype=torch.float16):
    """[2, 3, 15, 17] whose element offsets reach past 2**32 (see module docstring)."""
    shape = (2, 3, 15, 17)
    strides = (2**31 + 7, 2**30 + 5, 4099, 1)
    storage = sum((s - 1) * st for s, st in zip(shape, strides)) + 1
    assert storage > 2**32
    if device == "cuda" and cuda_free_bytes() < storage * 2 + 2 * GB:
        pytest.skip("not enough free GPU memory for an 8.6 GB storage")
    try:
        base = torch.empty(storage, dtype=dtype, device=device)
    except RuntimeError as e:  # e.g. strict overcommit limits on this machine
        skip_unless_ci(f"cannot reserve {storage * 2 / GB:.1f} GB of address space: {e}")
    x = base.as_strided(shape, strides)
    x.copy_(torch.randn(shape))
    return x


@pytest.mark.parametrize("device", device_params())
def test_input_offsets_beyond_32_bits(device):
    x = huge_strided_input(device)
    w, b = make_weight(torch.float16, device)
    out = conv1(x, w, b)
    assert_matches_reference(out, x, w, b)
    # Each image alone too: image 1 starts past 2**31.
    assert_matches_reference(conv1(x[1:], w, b), x[1:], w, b)


def test_meta_output_numel_beyond_32_bits():
    """Output sizes are computed in 64 bits (shape only; nothing is allocated)."""
    n = 2**14 + 3
    x = torch.empty(n, 3, 224, 224, device="meta")
    w = torch.empty(96, 3, 11, 11, device="meta")
    out = alexconv.conv1(x, w)
    assert out.shape == (n, 96, 55, 55) and out.numel() == n * OUT_PER_224 > 2**32


@pytest.mark.slow
def test_cpu_output_beyond_int32_elements():
    n = 7400
    assert n * OUT_PER_224 > 2**31
    if cpu_available_bytes() < 8 * GB:
        skip_unless_ci("needs ~5 GB of free RAM")
    x1 = make_input(1, 224, 224, torch.float16)
    w, b = make_weight(torch.float16)
    out = conv1(x1.expand(n, -1, -1, -1), w, b)
    assert out.shape == (n, 96, 55, 55)
    assert_matches_reference(out[:1], x1, w, b)
    for start in range(0, n, 256):
        chunk = out[start:start + 256]
        assert torch.equal(chunk, out[:1].expand_as(chunk)), f"images {start}.. differ from image 0"


@requires_cuda
@pytest.mark.cuda
@pytest.mark.slow
@pytest.mark.parametrize("dtype,allow_tf32", [(torch.float32, False), (torch.float32, True),
                                              (torch.float16, False)], ids=["fp32", "tf32", "fp16"])
def test_cuda_batch_8192_at_224(dtype, allow_tf32):
    n = 8192
    assert n * OUT_PER_224 > 2**31
    size = dtype.itemsize
    needed = n * (3 * 224 * 224 + OUT_PER_224) * size + 4 * GB  # + reference chunks
    if cuda_free_bytes() < max(needed, 16 * GB):
        pytest.skip(f"needs {needed / GB:.1f} GB of free GPU memory")
    x = torch.randn(n, 3, 224, 224, device="cuda", dtype=dtype)  # distinct images
    w, b = make_weight(dtype, "cuda")
    out = conv1(x, w, b, allow_tf32=allow_tf32)
    assert out.shape == (n, 96, 55, 55)
    picks = {0, n // 2, n - 1, *torch.randint(0, n, (5,)).tolist()}
    for i in sorted(picks):  # named images first: a clear message if one is wrong
        assert_matches_reference(out[i:i + 1], x[i:i + 1], w, b, allow_tf32)
    for start in range(0, n, 256):  # then every image
        sl = slice(start, start + 256)
        assert_matches_reference(out[sl], x[sl], w, b, allow_tf32)


@pytest.mark.parametrize("device", device_params())
def test_impossible_output_raises_out_of_memory_and_recovers(device):
    """An output of ~310 TB (batch 2**28 of an expanded image) cannot be allocated: a clean
    out-of-memory error, and the next call works. (The size is past the 128 TiB of x86-64
    user address space: a machine that overcommits memory grants a mere 4.9 TB and then
    kills the process when the kernel touches it.)"""
    x1 = make_input(1, 224, 224, device=device)
    w, b = make_weight(device=device)
    expected = torch.cuda.OutOfMemoryError if device == "cuda" else RuntimeError
    with pytest.raises(expected, match=r"(?i)out of memory|can't allocate memory|not enough memory"):
        alexconv.conv1(x1.expand(2**28, -1, -1, -1), w, b)
    x = make_input(2, 64, 48, device=device)
    assert_matches_reference(conv1(x, w, b), x, w, b)
