"""Progress in a Jupyter notebook, through a real kernel: a live bar (a widget) where ipywidgets is installed, lines on
stderr where it is not. Without ipywidgets Rich's bar warns 'install "ipywidgets" for Jupyter support' and shows
nothing, which is what a notebook user saw before."""

from __future__ import annotations

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

RUN = """
import stencilforge as sf
from stencilforge import problems, progress
progress.ProgressLines.EVERY_S = 0.2
problem = problems.problem("heat2d", (256, 256), "float64")[0]
result = sf.run(problem, steps=2500, backend="numpy", progress=True)
print("steps", result.summary["steps"])
"""


def outputs(source: str) -> list:
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(source))
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=120).execute()
    return nb.cells[0].outputs


def texts(outs, name: str) -> str:
    return "".join(o.get("text", "") for o in outs if o.get("output_type") == "stream" and o.get("name") == name)


def test_a_notebook_without_ipywidgets_gets_progress_lines():
    outs = outputs("import sys\nsys.modules['ipywidgets'] = None  # as if not installed\n" + RUN)
    assert "steps 2500" in texts(outs, "stdout")
    lines = [line for line in texts(outs, "stderr").splitlines() if line.startswith("heat2d: step ")]
    assert lines and all("steps/s" in line for line in lines)
    assert "ipywidgets" not in str(outs)


def test_a_notebook_with_ipywidgets_gets_a_live_bar():
    pytest.importorskip("ipywidgets")
    outs = outputs(RUN)
    assert "steps 2500" in texts(outs, "stdout")
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outs if o.get("output_type") == "display_data")
    assert 'install "ipywidgets"' not in str(outs) and "heat2d: step " not in texts(outs, "stderr")


def test_a_process_that_imported_ipykernel_is_no_notebook():
    """Starting a kernel imports ipykernel in the process that starts it (as the tests above do): that is no notebook
    to draw a bar in, so a run there without a terminal still writes lines (the suite's other progress tests failed
    in such a process)."""
    import sys

    import ipykernel  # noqa: F401

    from stencilforge import progress

    if sys.stderr.isatty():
        pytest.skip("stderr is a terminal here, where a bar is right")
    assert not progress.watching()
