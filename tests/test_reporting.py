"""What pytest prints here (tests/conftest.py): no letter per skipped test, the skips summed up
by reason, and the closing line's counts unchanged (CI reads it)."""

import pathlib

pytest_plugins = ["pytester"]

CONFTEST = pathlib.Path(__file__).with_name("conftest.py")


def test_skips_are_summed_up_by_reason(pytester):
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_inner="""
        import pytest

        @pytest.mark.parametrize("i", range(3))
        def test_gpu(i):
            pytest.skip("needs a CUDA device")

        @pytest.mark.skipif(True, reason="torch 1.13.1 has no torch.compile")
        def test_compile():
            pass

        def test_runs():
            pass

        @pytest.mark.xfail(reason="known")
        def test_xfail():
            assert False
    """)
    res = pytester.runpytest("-q", "-p", "no:cacheprovider")
    out = res.stdout.str()
    progress = next(line for line in out.splitlines() if line.endswith("[100%]"))
    assert progress.split()[0] == ".x", out  # one pass, one xfail; no 's'
    res.stdout.fnmatch_lines(["*- 4 skipped, by reason -*", "    3  needs a CUDA device",
                              "    1  torch 1.13.1 has no torch.compile", "1 passed, 4 skipped, 1 xfailed in *"])
    res.assert_outcomes(passed=1, skipped=4, xfailed=1)


_SLOW = """
    import pytest

    @pytest.mark.slow
    def test_slow():
        pass

    def test_quick():
        pass
"""


def test_slow_tests_run_in_ci_or_when_asked(pytester, monkeypatch):
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makeini("[pytest]\nmarkers =\n    slow: long-running\n")
    pytester.makepyfile(test_inner=_SLOW)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("ALEXCONV_SLOW_TESTS", raising=False)
    res = pytester.runpytest("-q", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1, deselected=1)
    res.stdout.fnmatch_lines(["1 test marked slow not run (deselected): CI runs them, and so does ALEXCONV_SLOW_TESTS=1 here"])
    for env in ("CI", "ALEXCONV_SLOW_TESTS"):
        monkeypatch.setenv(env, "true" if env == "CI" else "1")
        pytester.runpytest("-q", "-p", "no:cacheprovider").assert_outcomes(passed=2)
        monkeypatch.delenv(env)
    pytester.runpytest("-q", "-p", "no:cacheprovider", "-m", "slow").assert_outcomes(passed=1, deselected=1)
    pytester.runpytest("-q", "-p", "no:cacheprovider", "test_inner.py::test_slow").assert_outcomes(passed=1)
