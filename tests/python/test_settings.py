"""rlx.settings: the runtime switches start from their RLX_* environment variables (read
in a fresh process here), can be set from Python, and list themselves."""
import os
import subprocess
import sys

import rlx


def run_fresh(env_extra):
    env = dict(os.environ, **env_extra)
    code = "import rlx; s = rlx.settings; print(s.opt_level, s.profile, s.arena_packing)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def test_environment_sets_the_defaults():
    p = run_fresh({"RLX_OPT_LEVEL": "1", "RLX_PROFILE": "on", "RLX_ARENA_PACKING": "time"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["1", "True", "time"]


def test_a_value_that_does_not_parse_is_ignored_and_said():
    p = run_fresh({"RLX_OPT_LEVEL": "fast", "RLX_PROFILE": "maybe"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[:2] == ["2", "False"]
    assert "ignoring RLX_OPT_LEVEL='fast'" in p.stderr
    assert "ignoring RLX_PROFILE='maybe'" in p.stderr


def test_set_from_python_and_listed():
    saved = rlx.settings.dispatch_report
    try:
        rlx.settings.dispatch_report = True
        assert rlx.settings.dispatch_report is True
        assert "dispatch_report = 1  (RLX_DISPATCH_REPORT, default 0)" in repr(rlx.settings)
    finally:
        rlx.settings.dispatch_report = saved


def test_cpu_isa_follows_rlx_cpu_isa():
    # The level in use is the best this CPU has unless RLX_CPU_ISA names another it has;
    # baseline runs on every CPU of a multi-level build (a native build has only "native").
    code = "import rlx; print(rlx.cpu_isa())"
    best = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, RLX_CPU_ISA="auto"))
    assert best.returncode == 0, best.stderr
    assert best.stdout.strip() in ("baseline", "avx2", "avx512", "native")
    low = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, RLX_CPU_ISA="baseline"))
    assert low.returncode == 0, low.stderr
    expect = "native" if best.stdout.strip() == "native" else "baseline"
    assert low.stdout.strip() == expect
