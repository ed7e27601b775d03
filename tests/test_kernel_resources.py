"""scripts/dev/check_kernel_resources.py, the compile check's judge of ptxas reports: a kernel's own
spill counts, never a callee's listed after it."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "dev" / "check_kernel_resources.py"
spec = importlib.util.spec_from_file_location("check_kernel_resources", SCRIPT)
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)


def report(kernel: str, target: str, spill: int, callee_after: bool) -> str:
    lines = [
        f"ptxas info    : Compiling entry function '{kernel}' for '{target}'",
        f"ptxas info    : Function properties for {kernel}",
        f"    8 bytes stack frame, {spill} bytes spill stores, {spill} bytes spill loads",
        "ptxas info    : Used 128 registers, used 16 barriers, 8 bytes cumulative stack size",
    ]
    if callee_after:  # a __noinline__ device function the kernel calls, reported after it
        lines += ["ptxas info    : Function properties for _Z16store_exact_tilev",
                  "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"]
    return "\n".join(lines) + "\n"


def test_a_callee_after_the_kernel_does_not_hide_its_spill(tmp_path):
    log = tmp_path / "ptxas.log"
    log.write_text(report("_Z13conv1_s2d_kernelv", "sm_90a", 20, callee_after=True))
    assert check.parse(log.read_text())[("_Z13conv1_s2d_kernelv", "sm_90a")] == {
        "stack": 8, "spill": 20, "registers": 128}
    assert check.main(str(log)) == 1


def test_no_spill_passes_and_a_known_one_is_allowed(tmp_path):
    log = tmp_path / "ptxas.log"
    log.write_text(report("_Z13conv1_s2d_kernelv", "sm_90a", 0, callee_after=True))
    assert check.main(str(log)) == 0
    known = next(frag for frag, target in check.KNOWN_SPILLS if target == "sm_90a")
    limit = check.allowed_spill(known, "sm_90a")
    log.write_text(report(f"_Z{known}", "sm_90a", limit, callee_after=False))
    assert check.main(str(log)) == 0
    log.write_text(report(f"_Z{known}", "sm_90a", limit + 4, callee_after=False))
    assert check.main(str(log)) == 1


def test_each_toolkit_is_judged_by_its_own_list(tmp_path):
    # CUDA 11.8's ptxas is judged by KNOWN_SPILLS_CUDA11 (scripts/legacy/check_legacy.sh cuda118), CUDA 12+'s
    # by KNOWN_SPILLS: a spill one list allows fails under the other unless that one lists it too.
    log = tmp_path / "ptxas.log"
    frag, target = next(iter(check.KNOWN_SPILLS))
    target = "sm_90a" if target == "*" else target
    limit = check.allowed_spill(frag, target)
    log.write_text(report(f"_Z{frag}", target, limit, callee_after=False))
    assert check.main(str(log)) == 0
    assert check.main(str(log), cuda=11) == (0 if check.allowed_spill(frag, target, check.KNOWN_SPILLS_CUDA11) >= limit else 1)
    log.write_text(report("_Z13conv1_s2d_kernelv", "sm_90", 4, callee_after=False))
    assert check.main(str(log), cuda=11) == 1
