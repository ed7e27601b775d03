"""alexconv._compat: the one place that decides what the installed torch can do (issue 45)."""

import re

import pytest
import torch

from alexconv import _compat
from alexconv._library import _release


def test_every_capability_is_present_on_torch_2_4_and_newer():
    """The gated tests skip only on older torch: on the releases the project supported before
    torch 1.13 was added (CI runs 2.13), every capability is there, so nothing is skipped."""
    if _release(torch.__version__, 2) < (2, 4):
        pytest.skip(f"torch {torch.__version__} is older than 2.4: lacks {_compat.missing()}")
    assert _compat.missing() == []


def test_reasons_name_torch_and_the_feature():
    for capability in _compat.CAPABILITIES:
        reason = _compat.missing_reason(capability)
        assert reason.startswith(f"torch {torch.__version__} has no "), reason


def test_unknown_capability_is_an_error():
    with pytest.raises(KeyError, match=re.escape("unknown capability 'torch.fly'")):
        _compat.has("torch.fly")
