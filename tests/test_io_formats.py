"""Snapshot files: HDF5 and npz round-trip, attributes, chunking, XDMF sidecar, completeness."""

import json
import xml.etree.ElementTree as ET

import h5py
import numpy as np
import pytest

from stencilforge import __version__, problems
from stencilforge.backends import get_backend
from stencilforge.fingerprint import canonical
from stencilforge.io.hdf5 import chunk_shape
from stencilforge.io.series import open_series
from stencilforge.jobs import Outputs
from stencilforge.simulation import Simulation
from stencilforge.timeloop import LoopOptions


class Recorder:
    """Keeps a copy of the solution interior at every `every`-th step, to compare with what the file holds."""

    def __init__(self, every, name, interior):
        self.every, self.name, self.interior = every, name, interior
        self.frames = {}

    def __call__(self, step, t, fields, backend):
        self.frames[step] = (t, np.array(fields[self.name][self.interior]))

    def close(self):
        pass


def _run(tmp_path, problem, shape, steps, every, out_name, params=None, **kw):
    """The named problem run as the CLI runs it, its files written by `Outputs`; returns (simulation, recorder, result)."""
    made, built = problems.problem(problem, shape, **(params or {}))
    asked = Outputs(snapshot_every=every, out=tmp_path / out_name, command_line="stencilforge run test", params=built,
                    equations=canonical(made), **kw)
    with asked.prepare(problem) as outputs:
        sim = Simulation(made, get_backend("numpy"))
        recorder = Recorder(every, made.analysis.written[0], sim.lattice.interior)
        result = outputs.run_passes(sim, LoopOptions(steps=steps, observers=(recorder,)))
    return sim, recorder, result


@pytest.mark.parametrize("out_name", ["run.h5", "run.npz"])
def test_round_trip(tmp_path, out_name):
    sim, recorder, result = _run(tmp_path, "heat2d", (12, 10), 30, 5, out_name)
    with open_series(tmp_path / out_name) as series:
        assert len(series) == 6
        assert list(series.steps) == sorted(recorder.frames)
        assert series.names == ("u",)
        for i, step in enumerate(series.steps):
            t, frame = recorder.frames[step]
            assert series.times[i] == t
            got = series.frame("u", i)
            assert got.dtype == np.float32 and got.shape == (12, 10)
            assert got.tobytes() == frame.tobytes()
        info = series.info
        assert info.problem == "heat2d" and info.shape == (12, 10) and info.dtype == "float32"
        assert info.spacing == sim.lattice.spacing and info.lower == sim.lattice.lower
        assert info.params == {"alpha": 1.0, "dt": sim.dt}
        assert info.backend == "numpy" and info.version == __version__
        assert info.command_line == "stencilforge run test"
    assert result.summary["outputs"]["snapshots"]["count"] == 6


def test_hdf5_layout_chunked_and_compressed(tmp_path):
    _run(tmp_path, "heat2d", (12, 10), 10, 5, "run.h5", compression="gzip")
    with h5py.File(tmp_path / "run.h5", "r") as f:
        ds = f["fields/u"]
        assert ds.shape == (2, 12, 10) and ds.maxshape == (None, 12, 10)
        assert ds.chunks[0] == 1 and ds.compression == "gzip"
        assert json.loads(f.attrs["params"])["alpha"] == 1.0
        assert f.attrs["snapshot_every"] == 5
        assert list(f["step"][:]) == [5, 10]


def test_chunks_hold_one_snapshot_and_about_the_target_size():
    assert chunk_shape((8192, 8192), 4) == (1, 128, 8192)
    assert chunk_shape((10, 12), 8) == (1, 10, 12)
    assert chunk_shape((64, 512, 512), 4, target=1 << 20) == (1, 1, 512, 512)
    assert chunk_shape((4, 4, 100_000), 8, target=1 << 16) == (1, 1, 1, 8192)


def test_only_complete_snapshots_are_visible(tmp_path):
    _run(tmp_path, "heat2d", (12, 10), 15, 5, "run.h5")
    with h5py.File(tmp_path / "run.h5", "r+") as f:  # a writer that died after growing the field, before /step
        f["fields/u"].resize(4, axis=0)
    with open_series(tmp_path / "run.h5") as series:
        assert len(series) == 3 and series.steps[-1] == 15


@pytest.mark.parametrize("problem,shape,topology", [("heat2d", (12, 10), "2DCoRectMesh"), ("wave3d", (9, 10, 11), "3DCoRectMesh")])
def test_xdmf_references_the_datasets(tmp_path, problem, shape, topology):
    sim, _, _ = _run(tmp_path, problem, shape, 12, 4, "run.h5", {"radius": 2} if problem == "wave3d" else None)
    root = ET.parse(tmp_path / "run.xmf").getroot()
    collection = root.find("Domain/Grid")
    assert collection.get("CollectionType") == "Temporal"
    grids = collection.findall("Grid")
    with h5py.File(tmp_path / "run.h5", "r") as f:
        assert len(grids) == len(f["step"]) == 3
        for i, grid in enumerate(grids):
            assert float(grid.find("Time").get("Value")) == f["time"][i]
            topo = grid.find("Topology")
            assert topo.get("TopologyType") == topology
            assert tuple(map(int, topo.get("Dimensions").split())) == shape
            origin, spacing = grid.findall("Geometry/DataItem")
            assert tuple(map(float, origin.text.split())) == sim.lattice.lower
            assert tuple(map(float, spacing.text.split())) == sim.lattice.spacing
            slab = grid.find("Attribute/DataItem")
            select, data = slab.findall("DataItem")
            start, stride, count = np.array(select.text.split(), dtype=int).reshape(3, -1)
            assert list(start) == [i] + [0] * len(shape) and list(count) == [1, *shape]
            fname, dataset = data.text.strip().split(":")
            assert fname == "run.h5"
            assert tuple(map(int, data.get("Dimensions").split())) == f[dataset].shape
            assert data.get("Precision") == str(f[dataset].dtype.itemsize)
