"""The README as a new user follows it: at most 200 lines, every code block and command line runs
as written (in a scratch folder, in the README's order, with this environment's bin on PATH),
prints no warning, and every flag that the tools' --help texts give is accepted."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import sysconfig

import pytest
import torch

import alexconv
from alexconv import _aoti
from conftest import README_AOTI_EXPORT, user_env

REPO = pathlib.Path(__file__).resolve().parents[1]
README = REPO / "README.md"
BIN = pathlib.Path(sysconfig.get_path("scripts"))
AOTI_DEMO = pathlib.Path(alexconv.library_path()).parent / "bin" / "alexconv_aoti_demo"
MAX_LINES = 200

# How this suite runs each command line of the README's bash blocks.
HERE = "run as written in the scratch folder, in the README's order"
REPO_ROOT = "run as written from the repository root"
TEST_SH = "scripts/test.sh runs it as written (its first stage)"
ITSELF = "the command that runs this suite (CI: .ci/run)"
# Inline commands of the prose, and the line of a script that runs them so.
IN_SCRIPT = {
    "bash scripts/test.sh -k opcheck": ("scripts/test.sh", 'exec "$PYTHON" -m pytest -q "$@"'),
    "pip install --no-build-isolation -e .": ("scripts/install.sh", '"$PYTHON" -m pip install --no-build-isolation -e ".[test]"'),
}
COMMANDS = {
    "python3 -m venv .venv && . .venv/bin/activate": HERE,
    "bash scripts/demo.sh": TEST_SH,
    "bash scripts/test.sh": ITSELF,
    "alexconv-export model.pt2": HERE,
    "alexconv_aoti_demo model.pt2 --device cpu --batch 8": HERE,
    "alexconv-export model.pt": HERE,
    "alexconv_demo model.pt --device cpu --batch 8": HERE,
    "pip wheel --no-build-isolation --no-deps -w dist .": REPO_ROOT,
    "alexconv-export --help": HERE,
    **{command: "in " + script for command, (script, _) in IN_SCRIPT.items()},
}
# Commands that need what not every torch has.
NEEDS_AOTI = {"alexconv-export model.pt2", "alexconv_aoti_demo model.pt2 --device cpu --batch 8"}


def fenced_blocks() -> list[tuple[int, str, str]]:
    """(line number, language, code) of every fenced block, in order."""
    blocks, lines = [], README.read_text().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            start, lang = i + 1, lines[i][3:].strip()
            i += 1
            while not lines[i].startswith("```"):
                i += 1
            blocks.append((start, lang, "\n".join(lines[start:i])))
        i += 1
    return blocks


def inline_commands() -> list[str]:
    """Command lines written inline in the prose (a tool and at least one argument)."""
    prose = re.sub(r"^```.*?^```", "", README.read_text(), flags=re.M | re.S)
    tools = r"python3?|bash|pip|alexconv-export|alexconv_demo|alexconv_aoti_demo|torchrun|cmake"
    return re.findall(rf"`((?:{tools}) [^`]+)`", prose)


def command_lines(code: str) -> list[str]:
    """A bash block's commands: its lines without their trailing comments."""
    return [line.split("  #", 1)[0].strip() for line in code.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def printed_values(code: str) -> list[str]:
    """What a Python block's comments say its prints show: `print(...)  # True` or `# (2, 96, 55, 55)`
    (up to an "(or ...)" aside, which names what another machine prints instead)."""
    values = []
    for line in code.splitlines():
        match = re.match(r"\s*print\(.*\)\s+#\s*((?:True|False|\().*)$", line)
        if match and not (" (or " in match.group(1) and torch.cuda.is_available()):
            values.append(match.group(1).split(" (or ")[0].strip())
    return values


def _no_warning(what: str, res: subprocess.CompletedProcess) -> None:
    assert res.returncode == 0, f"{what} exited with {res.returncode}:\n{res.stdout}\n{res.stderr}"
    assert not re.search(r"Warning\b|warnings\.warn", res.stderr), f"{what} warned:\n{res.stderr}"


def test_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines, more than {MAX_LINES}: move details to docs/"


def test_every_command_line_is_run_somewhere():
    documented = [c for _, lang, code in fenced_blocks() if lang == "bash" for c in command_lines(code)]
    assert sorted(documented + inline_commands()) == sorted(COMMANDS), \
        "README's command lines changed: say in COMMANDS how each runs"
    test_sh = (REPO / "scripts" / "test.sh").read_text().splitlines()
    for command, how in COMMANDS.items():
        if how == TEST_SH:
            assert command in test_sh, f"scripts/test.sh no longer runs {command!r} as written"
    for command, (script, line) in IN_SCRIPT.items():
        assert line in [l.strip() for l in (REPO / script).read_text().splitlines()], \
            f"{script} no longer runs {command!r}"
    assert "exec bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()


def test_every_block_has_a_language_this_suite_knows():
    assert {lang for _, lang, _ in fenced_blocks()} <= {"bash", "python", "cmake", "cpp", ""}
    # The Python blocks say what they print, and the walkthrough checks it.
    assert len([v for _, lang, code in fenced_blocks() if lang == "python" for v in printed_values(code)]) >= 3


@pytest.fixture
def scratch(readme_scratch):
    return readme_scratch


_WALK = [b for b in fenced_blocks() if b[1] in ("bash", "python")] + [(0, "bash", "alexconv-export --help")]


@pytest.mark.parametrize("block", _WALK, ids=[f"line{line}-{lang}" if line else "inline" for line, lang, _ in _WALK])
def test_readme_block_runs_as_written(block, scratch, request):
    """The README's bash and Python blocks, in order, in one scratch folder (the Python block
    after `alexconv-export model.pt2` loads the package it wrote)."""
    line, lang, code = block
    if lang == "python":
        if "model.pt2" in code:  # the package that README's `alexconv-export model.pt2` writes
            request.getfixturevalue("readme_aoti_package")
        res = subprocess.run([sys.executable, "-c", code], cwd=scratch, capture_output=True, text=True,
                             timeout=600, env=user_env())
        _no_warning(f"README.md line {line} (python)", res)
        assert res.stdout.strip(), f"README.md line {line}: the block prints nothing"
        for expected in printed_values(code):
            assert expected in res.stdout, f"README.md line {line}: {expected!r} not printed:\n{res.stdout}"
        return
    for command in command_lines(code):
        how = COMMANDS[command]
        if how in (TEST_SH, ITSELF):
            continue  # test_every_command_line_is_run_somewhere
        if command in NEEDS_AOTI and _aoti.aoti_unsupported():
            pytest.skip(f"{command}: AOTInductor: {_aoti.aoti_unsupported()}")
        if command.startswith("alexconv_aoti_demo") and not AOTI_DEMO.is_file():
            pytest.skip(f"{command}: this torch has no AOTInductor package loader")
        if command == README_AOTI_EXPORT:  # run once, as written, for tests/test_aoti.py too
            res = request.getfixturevalue("readme_aoti_package")[1]
        else:
            res = subprocess.run(["bash", "-c", f"set -e; {command}"], cwd=REPO if how == REPO_ROOT else scratch,
                                 capture_output=True, text=True, timeout=900, env=user_env())
        _no_warning(f"README.md line {line}: {command}", res)
        if command.startswith("pip wheel"):
            tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
            assert list((REPO / "dist").glob(f"alexconv-{alexconv.__version__}-{tag}-*.whl")), "no wheel in dist/"


# Values for the --help texts' metavariables, or a file the test writes.
_VALUES = {"cpu|cuda": "cpu", "N": "2", "HW": "35", "K": "1", "A": "0.01", "R": "0.01", "S": "3"}


def _usage_flags(tool: str) -> list[tuple[str, str | None]]:
    res = subprocess.run([str(BIN / tool), "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    usage = res.stdout.split("\n\n", 1)[0]
    flags = re.findall(r"\[(--[a-z0-9-]+)(?: ([^\]]+))?\]", usage)
    assert flags, usage
    return [(flag, metavar or None) for flag, metavar in flags]


def test_every_flag_of_alexconv_demo_works(scratch):
    model = scratch / "model.pt"
    if not model.is_file():  # (the walkthrough writes it; alone, this test writes its own)
        subprocess.run([str(BIN / "alexconv-export"), str(model)], check=True, capture_output=True)
    x = torch.rand(2, 3, 35, 35)
    torch.save(x, scratch / "in.pt")
    with torch.no_grad():
        torch.save(torch.jit.load(str(model))(x), scratch / "out.pt")
    args = []
    for flag, metavar in _usage_flags("alexconv_demo"):
        value = {"IN.pt": scratch / "in.pt", "OUT.pt": scratch / "out.pt"}.get(metavar) or _VALUES[metavar]
        args += [flag, str(value)]
    res = subprocess.run([str(BIN / "alexconv_demo"), str(model), *args], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0 and "OK: output matches the reference" in res.stdout, res.stdout + res.stderr


def test_every_flag_of_alexconv_aoti_demo_works(readme_aoti_package):
    package = readme_aoti_package[0]
    if not AOTI_DEMO.is_file():
        pytest.skip("this torch has no AOTInductor package loader")
    args = [a for flag, metavar in _usage_flags("alexconv_aoti_demo") for a in (flag, _VALUES[metavar])]
    res = subprocess.run([str(BIN / "alexconv_aoti_demo"), str(package), *args], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0 and "OK: the package matches" in res.stdout, res.stdout + res.stderr


def test_every_flag_of_alexconv_export_works(tmp_path):
    """Every option at once on a TorchScript file; --device is a .pt2 option, which the
    walkthrough's package and tests/test_aoti.py's (--device cpu) give."""
    torch.manual_seed(0)
    torch.save(alexconv.Model().state_dict(), tmp_path / "sd.pt")
    values = {"STATE_DICT": str(tmp_path / "sd.pt"), "{bfloat16,float16,float32}": "bfloat16", "SEED": "3"}
    args = []
    for flag, metavar in _usage_flags("alexconv-export"):
        if flag == "--device":
            assert "--device\", device" in (REPO / "tests" / "test_aoti.py").read_text()
            continue
        args += [flag] + ([values[metavar]] if metavar else [])
    res = subprocess.run([str(BIN / "alexconv-export"), str(tmp_path / "m.pt"), *args], capture_output=True,
                         text=True, timeout=300)
    _no_warning("alexconv-export with every option", res)
    assert res.stdout.strip() == f"saved scripted ModelNew (bfloat16, allow_tf32=True) to {tmp_path / 'm.pt'}"
    loaded = torch.jit.load(str(tmp_path / "m.pt"))
    assert loaded.conv1.weight.dtype == torch.bfloat16 and loaded.allow_tf32
    torch.testing.assert_close(loaded.conv1.weight.float(), torch.load(tmp_path / "sd.pt")["conv1.weight"],
                               atol=1e-2, rtol=1e-2)


def _code(line: str, lang: str) -> str:
    """A line without its comment; a CMake target name as TARGET (the README's is `app`)."""
    if lang == "cmake":
        line = line.split("#", 1)[0]
        line = re.sub(r"^target_link_libraries\(\S+", "target_link_libraries(TARGET", line.strip())
    elif not line.lstrip().startswith("#include"):
        line = line.split("//", 1)[0]
    return line.strip()


def test_cmake_and_cpp_snippets_are_the_tested_consumers():
    """The README's CMake and C++ lines are tests/cmake_consumer's, which
    tests/test_cmake_package.py builds and runs."""
    consumer = REPO / "tests" / "cmake_consumer"
    known = {lang: {_code(line, lang) for line in (consumer / name).read_text().splitlines()}
             for lang, name in (("cmake", "CMakeLists.txt"), ("cpp", "main.cpp"))}
    checked = 0
    for _, lang, code in fenced_blocks():
        for line in code.splitlines() if lang in known else []:
            if _code(line, lang):
                assert _code(line, lang) in known[lang], f"README's {lang} line {line!r} is not in {consumer}"
                checked += 1
    assert checked >= 4
