"""Shared helpers for the rlx Python tests (run by ctest -L python, or
PYTHONPATH=build/python python3 -m pytest tests/python)."""
import os
import pathlib

import numpy as np
import pytest

import rlx

ONNX_DATA = pathlib.Path(
    os.environ.get("RLX_ONNX_TEST_DATA", pathlib.Path(__file__).parent.parent / "data" / "onnx")
)


def run_graph(g, inputs, **compile_args):
    """Compiles g on the CPU and runs it on inputs (a dict or a list)."""
    cg = rlx.Session("cpu").compile(g, **compile_args)
    return cg.run(inputs)


def tolerance(dtype):
    """(rtol, atol) for comparing an rlx result in dtype with NumPy's."""
    return {
        rlx.f64: (1e-12, 1e-12),
        rlx.f32: (1e-5, 1e-6),
        rlx.f16: (2e-3, 2e-3),
        rlx.bf16: (1e-2, 1e-2),
    }.get(dtype, (0, 0))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
