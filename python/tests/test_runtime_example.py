"""examples/python/runtime_loop.py (the example docs/python_runtime.md walks through) runs against
the kvcanary package under test and passes in each mode."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kvcanary

pytest.importorskip("torch")  # the examples' engines are torch tensors

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "runtime_loop.py"


def run_example(mode):
    env = dict(os.environ, PYTHONPATH=str(Path(kvcanary.__file__).resolve().parents[1]))
    env.pop("KVCANARY_MODE", None)
    if mode is not None:
        env["KVCANARY_MODE"] = mode
    return subprocess.run([sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("mode", [None, "log", "raise"])
def test_example_catches_the_corruption(mode):
    result = run_example(mode)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "corrupted the record of slot" in result.stdout
    assert "PASS: " in result.stdout
    if mode == "raise":
        assert "CorruptionError with" in result.stdout


def test_example_in_mode_none_runs_unchecked():
    result = run_example("none")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kvcanary is off" in result.stdout


def test_the_docs_example_runs():
    text = (EXAMPLE.parents[2] / "docs" / "python_runtime.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    env = dict(os.environ, PYTHONPATH=str(Path(kvcanary.__file__).resolve().parents[1]))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "step 4: caught [('TAIL_K_FULL', 4)" in result.stdout
