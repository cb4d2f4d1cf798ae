"""The code a run of a problem compiles, for people to read (`stencilforge show-kernel`); no GPU needed.

The problem's `Simulation` is built on NumPy with a stand-in backend that keeps
the source each stage would be compiled from, so what is shown is what a run
takes: a pass of one linear equation as its sweep (the CUDA strategy `auto` or
`strategy` picks, and on CUDA the kernel of several steps a pass where the run
fuses them; on numba the first of its schedules that applies; with `generated`,
CUDA's generated pass), one-sided derivatives as the axis-operator kernel, any
other pass as its generated kernel with the schedule and ghost-image stores a
run uses, and on CUDA the two-steps-per-pass kernel where the run would take one.
"""

from __future__ import annotations

from .backends.cuda import codegen
from .backends.cuda.backend import fused_kernel, pair_kernel, pass_kernel, resolve
from .backends.cuda.kernel import module_source
from .backends.numba.backend import axis_operator_source
from .backends.numba.schedules import sweep_source, takes
from .backends.numpy_ref import NumpyBackend
from .errors import StencilforgeError
from .ir.analysis import slot_name
from .printers import numba as printers_numba
from .problem import Problem
from .simulation import Simulation

TARGETS = ("cuda", "numba")


class _Recorder:
    """NumPy's backend, keeping the source `target` would compile for each pass (and for a fused pass)."""

    def __init__(self, target: str, strategy: str):
        self.target, self.strategy = target, strategy
        self.writes_ghost_images = target == "cuda"
        self.fuses_steps = target == "cuda"  # numba's fused sweeps are not shown
        self.sources: list[str] = []
        self.swept = False
        self._numpy = NumpyBackend()

    def __getattr__(self, name: str):
        return getattr(self._numpy, name)

    def takes_sweep(self, sweep, grid) -> bool:
        """As the target's backend answers (`CudaBackend.takes_sweep`, `NumbaBackend.takes_sweep`)."""
        if self.target == "cuda":
            return codegen.takes_sweep(sweep, grid.dtype, self.strategy)
        return takes(sweep, grid)

    def sweep(self, sweep, grid, background: bool = False):
        self.swept = True
        head = f"pass {len(self.sources) + 1}: {sweep.out}, a sweep"
        if self.target == "cuda":
            k = resolve(sweep, self.strategy, None, grid.shape, grid.dtype)
            self.sources.append(module_source([k], grid.dtype, f"{head}, strategy {k.strategy}, tile {k.tile}, block {k.block}"))
        else:
            self.sources.append(f"# {head}\n{sweep_source(sweep, grid)}")
        return self._numpy.sweep(sweep, grid)

    def sweep_fused(self, sweep, grid, *, window=None):
        built = fused_kernel(sweep, grid, self.strategy)
        if not isinstance(built, str):
            k, steps = built
            self.sources.append(module_source([k], grid.dtype, f"{steps} steps per pass (where the run fuses them), tile {k.tile}"))
        return None

    def axis_operator(self, op, dtype, shape=None, background: bool = False):
        self.swept = True
        head = f"pass {len(self.sources) + 1}: {', '.join(d.out for d in op.outputs)}, one-sided derivatives of {op.inp}"
        if self.target == "cuda":
            k = resolve(op, self.strategy, None, shape, dtype)
            self.sources.append(module_source([k], dtype, f"{head}, strategy {k.strategy}, tile {k.tile}, block {k.block}"))
        else:
            self.sources.append(f"# {head}\n{axis_operator_source(op)[0]}")
        return self._numpy.axis_operator(op, dtype, shape)

    def equation_pass(self, p, lattice, constants, images=None, background: bool = False):
        writes = ", ".join(slot_name(s) for s in p.writes)
        if self.target == "cuda":
            k = pass_kernel(p, lattice, constants, images)
            self.sources.append(f"// pass {len(self.sources) + 1}: {writes}; grid {k.blocks}, block {k.threads}\n{k.source}")
        else:
            source = printers_numba.pass_source(p, lattice.ndim, lattice.dtype, constants, lattice.cells)[0]
            self.sources.append(f"# pass {len(self.sources) + 1}: {writes}\n{source}")
        return self._numpy.equation_pass(p, lattice, constants)

    def equation_pair(self, p, lattice, constants, walls, reach: int, images=None):
        k = pair_kernel(p, lattice, constants, walls, reach, images) if self.target == "cuda" else None
        if k is not None:
            self.sources.append(f"// two steps per pass (where the run fuses them); grid {k.blocks}, block {k.threads}\n{k.source}")
        return None


def problem_source(problem: Problem, backend: str = "cuda", strategy: str = "auto") -> str:
    """The kernels a run of `problem` on `backend` ("cuda" or "numba") compiles, as source text."""
    if backend not in TARGETS:
        raise StencilforgeError(f"show-kernel shows the {' and '.join(TARGETS)} backends' code, not {backend!r}")
    if strategy != "auto" and (backend != "cuda" or strategy not in codegen.STRATEGIES):
        raise StencilforgeError(f"--strategy chooses among the CUDA schedules ({', '.join(codegen.STRATEGIES)}) of a linear pass "
                                "or of one-sided derivatives")
    recorder = _Recorder(backend, strategy)
    sim = Simulation(problem, recorder)
    if strategy not in ("auto", codegen.GENERATED) and not recorder.swept:
        raise StencilforgeError(f"--strategy chooses among the schedules of a linear pass or of one-sided derivatives; "
                                f"{problem.name} has neither: its passes run as generated kernels")
    sim.build_fused()
    return "\n".join(recorder.sources)
