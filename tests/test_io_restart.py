"""Checkpoint and resume: 100 steps in one run equal 50 + resume 50, bit for bit, on every CPU backend."""

import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

from stencilforge.io import checkpoint
from stencilforge.jobs import Outputs, named_problem
from stencilforge.runner import run_with

CASES = {
    "heat2d": ((20, 17), {}),
    "wave3d": ((11, 10, 9), {"radius": 2}),
    "wave3d-source": ((11, 10, 9), {"radius": 2, "source": True, "velocity": "layered"}),
}


def _run(problem, shape, params, backend, steps, ckpt: Path, resume: Path | None = None):
    """As `stencilforge run` runs a named problem: fresh, or rebuilt from the checkpoint `resume` for `steps` more."""
    made, built = named_problem(problem, shape, None, params, resume)
    return run_with(made, Outputs(checkpoint_every=50, checkpoint=ckpt, resume=resume, params=built), steps=steps, backend=backend)


def _fields(path: Path) -> dict[str, bytes]:
    with h5py.File(path, "r") as f:
        return {name: ds[...].tobytes() for name, ds in f["fields"].items()}


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("case", list(CASES))
def test_resume_is_bitwise_identical(tmp_path, backend, case):
    if backend == "numba" and case == "wave3d-source":
        pytest.skip("one wave3d case per compiled backend keeps CI short")
    problem = case.split("-")[0]
    shape, params = CASES[case]
    straight = _run(problem, shape, params, backend, 100, tmp_path / "straight.h5")
    _run(problem, shape, params, backend, 50, tmp_path / "half.h5")
    resumed = _run(problem, shape, params, backend, 50, tmp_path / "resumed.h5", resume=tmp_path / "half.h5")
    assert resumed.summary["step"] == straight.summary["step"] == 100
    assert resumed.summary["t"] == straight.summary["t"]
    for name, arr in straight.fields.items():
        assert resumed.fields[name].tobytes() == arr.tobytes(), name
    assert _fields(tmp_path / "resumed.h5") == _fields(tmp_path / "straight.h5")  # ghost layers and both time levels too


def test_checkpoint_holds_the_full_state(tmp_path):
    _run("wave3d", (11, 10, 9), {"radius": 2}, "numpy", 50, tmp_path / "c.h5")
    ckpt = checkpoint.read(tmp_path / "c.h5")
    assert ckpt.step == 50 and ckpt.info.problem == "wave3d" and ckpt.info.shape == (11, 10, 9)
    assert set(ckpt.fields) == {"u_prev", "u", "u_next", "vel"}  # every time level, by the passes' slot names
    assert ckpt.fields["u"].shape == (15, 14, 13)  # padded: ghost layers included
    assert ckpt.info.params["radius"] == 2 and ckpt.info.backend == "numpy"
    assert not list(tmp_path.glob(".*"))  # no temporary file left beside it


def test_a_failed_checkpoint_write_keeps_the_previous_one(tmp_path, monkeypatch):
    path = tmp_path / "c.h5"
    _run("heat2d", (20, 17), {}, "numpy", 50, path)
    before = path.read_bytes()

    def broken(f, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(h5py.Group, "create_dataset", broken)
    with pytest.raises(Exception, match="No space left on device.*last complete checkpoint: step 50"):
        _run(None, None, {}, "numpy", 50, path, resume=path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["c.h5"]


@pytest.mark.parametrize("name", ["heat2d", "wave3d"])
def test_a_checkpoint_of_the_lowered_sweep_path_resumes_on_the_pass_path_bitwise(name, tmp_path):
    """Checkpoints written before the named problems ran through their passes name the next level u_new (a leapfrog
    keeps u and u_prev only): the pass path resumes them and ends on the bits of one straight run. The fixtures
    were written at 6cfa740 by `stencilforge run heat2d --shape 12 10 --steps 6 --checkpoint-every 3 --backend numpy`
    and `stencilforge run wave3d --shape 10 9 8 --radius 2 --velocity layered --source` with the same options."""
    import stencilforge as sf
    from stencilforge.problems import heat, wave3d

    problem = (heat.problem(2, (12, 10), "float32") if name == "heat2d"
               else wave3d.problem((10, 9, 8), "float32", radius=2, velocity="layered", source=True)[0])
    path = tmp_path / "lowered.ckpt.h5"  # a resumed run checkpoints its end into the file it resumed from
    shutil.copyfile(Path(__file__).parent / "fixtures" / f"lowered_{name}.ckpt.h5", path)
    resumed = sf.run(problem, steps=3, resume=str(path), backend="numpy")
    straight = sf.run(problem, steps=9, backend="numpy")
    assert resumed.summary["step"] == 9
    np.testing.assert_array_equal(resumed.fields["u"], straight.fields["u"])
