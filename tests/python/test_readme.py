"""The Python examples of the README and docs/python.md run as written (from the repository
root)."""
import contextlib
import io
import os
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_readme_python_examples_run():
    blocks = []
    for doc in ("README.md", "docs/python.md"):
        found = re.findall(r"```python\n(.*?)```", (ROOT / doc).read_text(), re.S)
        assert found, doc
        blocks += found
    assert len(blocks) >= 5
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        scope = {}
        with contextlib.redirect_stdout(io.StringIO()) as out:
            for block in blocks:
                exec(compile(block, "README.md", "exec"), scope)
    finally:
        os.chdir(cwd)
    printed = out.getvalue()
    assert "graph main(" in printed and "'y': array(" in printed
    np = scope["np"]
    assert scope["loss"] < 1e-4  # the training example converged
    np.testing.assert_allclose(scope["t"].param("w").ravel(), [1.0, -2.0, 0.5], atol=1e-2)
    # the function-transform example: per-example gradients and a Hessian-vector product
    X, Y, w0 = scope["X"], scope["Y"], scope["w0"]
    per_example = scope["per_example"]
    assert per_example.shape == (8, 3, 1)
    for i in range(8):  # d/dw (x w - y)^2 = 2 x^T (x w - y)
        x = X[i:i + 1].astype(np.float64)
        np.testing.assert_allclose(per_example[i], 2 * x.T @ (x @ w0 - Y[i:i + 1]), rtol=1e-5)
    np.testing.assert_allclose(scope["hv"], 2 * X.T.astype(np.float64) @ X @ np.ones((3, 1))
                               / len(X), rtol=1e-4)
