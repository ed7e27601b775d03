"""PyTorch's own custom-op conformance checks: schema, fake (Meta) kernel, AOT dispatch."""

import pytest
import torch

from conftest import device_params, make_input, make_weight, requires

OP = torch.ops.alexconv.conv1.default


def test_schema_is_the_published_one():
    assert str(OP._schema) == (
        "alexconv::conv1(Tensor input, Tensor weight, Tensor? bias=None, *, "
        "bool allow_tf32=False, int padding=2, bool relu=False) -> Tensor"
    )
    assert str(torch.ops.alexconv.conv1_kernel.default._schema) == (
        "alexconv::conv1_kernel(Tensor input, Tensor weight, Tensor? bias=None, *, "
        "bool allow_tf32=False, int padding=2, bool relu=False) -> str"
    )


def test_python_wrapper_takes_allow_tf32_by_keyword_only():
    """alexconv.conv1 matches the schema: allow_tf32, padding and relu after `*`, so a
    positional True is an error."""
    import inspect

    import alexconv
    for fn in (alexconv.conv1, alexconv.conv1_kernel):
        params = inspect.signature(fn).parameters
        for name, default in [("allow_tf32", False), ("padding", 2), ("relu", False)]:
            assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, (fn, name)
            assert params[name].default == default and type(params[name].default) is type(default)
    x, (w, b) = make_input(1, 15, 15), make_weight()
    with pytest.raises(TypeError):
        alexconv.conv1(x, w, b, True)
    assert torch.equal(alexconv.conv1(x, w, b, allow_tf32=True), alexconv.conv1(x, w, b))


@requires("opcheck")
@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_opcheck(device, dtype, bias, layout, generator):
    x = make_input(2, 31, 23, dtype, device, layout, generator=generator)
    w, b = make_weight(dtype, device, bias, generator=generator)
    torch.library.opcheck(OP, (x, w, b), {"allow_tf32": False})


def test_meta_kernel_shape_dtype_layout():
    x = torch.empty(3, 3, 227, 100, device="meta", dtype=torch.bfloat16)
    w = torch.empty(96, 3, 11, 11, device="meta", dtype=torch.bfloat16)
    out = OP(x, w, None)
    assert out.device.type == "meta" and out.dtype == torch.bfloat16
    assert out.shape == (3, 96, 56, 24)
    cl = OP(x.contiguous(memory_format=torch.channels_last), w, None)
    assert cl.is_contiguous(memory_format=torch.channels_last)
