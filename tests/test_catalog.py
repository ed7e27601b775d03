"""op/cuda/catalog.h is the one list of the CUDA paths and GPU classes: the op's C++ header, the
Python docstring, the architecture map and the torch-free harness name the same paths, and no
other source spells a class's shared-memory budget. Reads files only: no build, no GPU."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CATALOG = (ROOT / "op" / "cuda" / "catalog.h").read_text()
NAMES = re.findall(r'\{Kernel::k\w+, "(\w+)", "\w*"\}', CATALOG)
BUDGETS = dict(re.findall(r"constexpr size_t (kSmem\w+) = (\d+);", CATALOG))


def _code(text: str) -> str:
    """C++ without its comments and string literals (error messages may quote a budget)."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r'"(\\.|[^"\\])*"', '""', text)


def test_the_catalog_lists_every_kernel_enumerator_once():
    enumerators = re.search(r"enum class Kernel \{([^}]*)\}", CATALOG).group(1)
    assert len(NAMES) == len(set(NAMES)) == len(enumerators.split(","))
    assert {"wgmma", "s2d", "s2d_mma_sync", "mma_sync", "aten", "direct"} <= set(NAMES)


def test_docs_and_docstrings_name_every_path():
    header = (ROOT / "op" / "include" / "alexconv" / "conv1.h").read_text()
    schema_comment = header[: header.index("kConv1KernelSchema")]
    docstring = (ROOT / "python" / "alexconv" / "ops.py").read_text()
    docstring = docstring[docstring.index("def conv1_kernel"):]
    architecture = (ROOT / "docs" / "architecture.md").read_text()
    for name in NAMES:
        assert f'"{name}"' in schema_comment, f"conv1.h's conv1_kernel comment omits {name}"
        assert f'"{name}"' in docstring, f"alexconv.conv1_kernel's docstring omits {name}"
        assert re.search(rf"\b{name}\b", architecture), f"docs/architecture.md omits {name}"


def test_the_harness_takes_kernel_names_from_the_catalog():
    plan = _code((ROOT / "tests" / "cuda_harness" / "plan.h").read_text())
    raw = (ROOT / "tests" / "cuda_harness" / "plan.h").read_text()
    assert "kernel_name(Kernel::" in plan
    for name in NAMES:
        assert f'"{name}"' not in raw, f"tests/cuda_harness/plan.h spells {name} itself"


def test_no_other_source_spells_a_budget():
    assert set(BUDGETS) == {"kSmemTuring", "kSmem99KB", "kSmemA100", "kSmemHopper"}
    sources = [p for d in ("op", "tests/cuda_harness") for p in (ROOT / d).rglob("*")
               if p.suffix in {".h", ".cuh", ".cu", ".cpp"} and p.name != "catalog.h"]
    for path in sources:
        code = _code(path.read_text())
        for name, value in BUDGETS.items():
            if name == "kSmemTuring":  # 65536 is also the register file's size
                continue
            assert not re.search(rf"\b{value}\b", code), f"{path.relative_to(ROOT)} spells {value}: use {name}"
