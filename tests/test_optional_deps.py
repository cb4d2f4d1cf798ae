"""The core runs without the optional packages; a missing one is named in one line with the extra that installs it."""

import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

import stencilforge as sf
from stencilforge.cli import app, join_multi_values
from stencilforge.errors import StencilforgeError
from stencilforge.optional import require

OPTIONAL = ("h5py", "h5netcdf", "matplotlib", "PIL", "cupy", "mpi4py", "scipy")


def invoke(*args):
    return CliRunner().invoke(app, join_multi_values([str(a) for a in args]))


def hide(monkeypatch, *names):
    """Make `import name` fail as it does where the package is not installed."""
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


@pytest.fixture(autouse=True)
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_importing_the_package_and_the_cli_loads_no_optional_package():
    code = (
        "import sys\n"
        f"blocked = {OPTIONAL!r}\n"
        "for name in blocked: sys.modules[name] = None\n"
        "import stencilforge, stencilforge.cli\n"
        "print(stencilforge.__version__)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == sf.__version__


@pytest.mark.parametrize("hidden, args, line", [
    ("h5py", ["--snapshot-every", "5", "--out", "run.h5"], 'error: snapshot file run.h5 needs h5py: pip install "stencilforge[io]"'),
    ("h5py", ["--checkpoint-every", "5"], 'error: checkpoint heat2d.ckpt.h5 needs h5py: pip install "stencilforge[io]"'),
    ("h5netcdf", ["--snapshot-every", "5", "--out", "run.nc"],
     'error: snapshot file run.nc needs h5netcdf: pip install "stencilforge[netcdf]"'),
])
def test_file_outputs_without_their_library_are_refused_before_the_run(monkeypatch, workdir, hidden, args, line):
    hide(monkeypatch, hidden)
    res = invoke("run", "heat2d", "--shape", "16", "16", "--steps", "10", "--backend", "numpy", *args)
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines() == [line]
    assert list(workdir.iterdir()) == []


def test_npz_snapshots_need_no_h5py(monkeypatch, workdir):
    hide(monkeypatch, "h5py")
    res = invoke("run", "heat2d", "--shape", "16", "16", "--steps", "10", "--backend", "numpy",
                 "--snapshot-every", "5", "--out", "run.npz")
    assert res.exit_code == 0, res.stderr
    assert (workdir / "run.npz").is_file()


def test_pictures_without_matplotlib(monkeypatch, workdir):
    assert invoke("run", "heat2d", "--shape", "16", "16", "--steps", "5", "--snapshot-every", "5", "--out", "r.npz",
                  "--backend", "numpy").exit_code == 0
    hide(monkeypatch, "matplotlib", "matplotlib.figure", "matplotlib.animation", "matplotlib.colors")
    expect = 'needs matplotlib: pip install "stencilforge[plot]"'
    for args, what in ((["plot", "r.npz", "-o", "f.png"], "drawing f.png"), (["animate", "r.npz", "-o", "a.gif"], "drawing a.gif"),
                       (["run", "heat2d", "--shape", "16", "16", "--steps", "5", "--png", "p.png"], "image p.png")):
        res = invoke(*args)
        assert res.exit_code == 2
        assert res.stderr.strip().splitlines() == [f"error: {what} {expect}"], res.stderr
    assert sorted(p.name for p in workdir.iterdir()) == ["r.npz"]


def test_library_calls_name_the_extra(monkeypatch, workdir):
    hide(monkeypatch, "h5py", "mpi4py", "mpi4py.MPI")
    grid = sf.Grid((8, 8), extent=1.0)
    u = sf.Field("u", grid)
    problem = sf.Problem([sf.Eq(u.next, u + 0.1 * sf.laplacian(u))], initial={u: 1.0}, boundary={u: sf.Dirichlet(0.0)})
    with pytest.raises(StencilforgeError, match=r'^snapshot file out.h5 needs h5py: pip install "stencilforge\[io\]"$'):
        sf.run(problem, backend="numpy", out="out.h5", snapshot_every=2)
    with pytest.raises(StencilforgeError, match=r"^an MPI run needs mpi4py: .*stencilforge\[mpi\]"):
        sf.run(problem, backend="numpy", procs=(1, 1))


def test_require_returns_the_module_when_present():
    assert require("numpy", "anything") is np
