"""What users would write instead: the same update in NumPy, CuPy, PyTorch, JAX, a naive CUDA kernel,
and the CPU stencil compilers Devito and pystencils.

Every peer computes the workload's update from its plan, the way a user would
write it by hand for that library: slicing with Python-float coefficients (so
float32 stays float32), in place where the library allows it, functionally in
JAX. The naive CUDA peer is one thread per cell with linear indexing and the
coefficients as literals, the usual first hand-written kernel. Devito and
pystencils get the update as a symbolic expression with the same coefficients
and compile it their own way (optional: skipped with a note when not installed).
A peer's result is checked against ours before its time counts (see suite.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import importlib.util
import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..backends.numpy_ref import shifted
from ..grid import Grid
from ..plan import AxisOperator, Sweep
from .measure import Clock, cupy_event_clock, torch_event_clock, wall_clock
from .workloads import Case


class Unsupported(Exception):
    """A peer cannot run this workload here (not installed, no GPU backend, ...): reported as skipped."""


def sweep_rhs(sweep: Sweep, grid: Grid, fields) -> object:
    """The sweep's right-hand side on the interior, for any array type with slicing."""
    interior = grid.interior
    total = None
    for term in sweep.terms:
        part = None
        for offset, coeff in term.stencil.entries:
            value = float(coeff) * fields[term.field][shifted(interior, offset)]
            part = value if part is None else part + value
        if term.factor is not None:
            part = part * fields[term.factor][interior]
        total = part if total is None else total + part
    return total


def inplace_set(a, index, value):
    a[index] = value
    return a


def jax_set(a, index, value):
    return a.at[index].set(value)


def sweep_step(case: Case, setitem=inplace_set) -> Callable[[dict], dict]:
    """One step on a dict of fields: write the interior of `plan.out`, then swap the buffers."""
    plan, grid, (a, b) = case.plan, case.grid, case.swap

    def step(fields: dict) -> dict:
        new = dict(fields)
        new[plan.out] = setitem(fields[plan.out], grid.interior, sweep_rhs(plan, grid, fields))
        new[a], new[b] = new[b], new[a]
        return new

    return step


def operator_apply(op: AxisOperator, u, outs: list, setitem=inplace_set) -> list:
    """Every derivative of the operator: interior rows by slicing, closure rows one by one."""
    n = u.shape[op.axis]
    lead = (slice(None),) * op.axis

    def along(index):
        return lead + (index,)

    result = []
    for d, out in zip(op.outputs, outs):
        nl, nr = len(d.left), len(d.right)
        acc = None
        for o, w in d.interior:
            value = float(w) * u[along(slice(nl + o, n - nr + o))]
            acc = value if acc is None else acc + value
        out = setitem(out, along(slice(nl, n - nr)), acc * float(d.scale))
        rows = [(k, row) for k, row in enumerate(d.left)] + [(n - 1 - k, row) for k, row in enumerate(d.right)]
        for k, row in rows:
            acc = None
            for o, w in row:
                value = float(w) * u[along(k + o)]
                acc = value if acc is None else acc + value
            out = setitem(out, along(k), acc * float(d.scale))
        result.append(out)
    return result


@dataclass
class SlicingRunner:
    """Runs a step function on a dict of arrays of one array library (NumPy, CuPy, PyTorch eager or compiled)."""

    case: Case
    fields: dict
    step: Callable
    to_host: Callable
    sync: Callable[[], None]
    clock: Clock

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.fields = self.step(self.fields)

    def latest(self) -> dict[str, np.ndarray]:
        self.sync()
        return {name: self.to_host(self.fields[name]) for name in self.case.outputs}


def _step_for(case: Case) -> Callable[[dict], dict]:
    if case.is_sweep:
        return sweep_step(case)
    op = case.plan
    outs = [d.out for d in op.outputs]

    def step(fields: dict) -> dict:
        operator_apply(op, fields["u"], [fields[o] for o in outs])
        return fields

    return step


@dataclass(frozen=True)
class Peer:
    """A named alternative implementation on one device kind ('cpu' or 'gpu')."""

    name: str
    device: str
    description: str
    make: Callable[[Case], object] = field(repr=False)

    def runner(self, case: Case):
        """A Runner for `case` on fresh copies of its fields; raises Unsupported with the reason."""
        return self.make(case)


def _need(module: str, what: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise Unsupported(f"{what} is not installed")


def _numpy(case: Case):
    fields = {k: v.copy() for k, v in case.fields.items()}
    return SlicingRunner(case, fields, _step_for(case), np.array, lambda: None, wall_clock)


def _cupy_module():
    _need("cupy", "cupy")
    import cupy

    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # any CUDA runtime failure means no usable GPU for this peer
        raise Unsupported(f"cupy has no usable GPU ({type(exc).__name__})") from None
    return cupy


def _cupy(case: Case):
    cupy = _cupy_module()
    fields = {k: cupy.asarray(v) for k, v in case.fields.items()}
    return SlicingRunner(case, fields, _step_for(case), cupy.asnumpy, cupy.cuda.Device().synchronize, cupy_event_clock)


def _torch_module():
    _need("torch", "torch")
    import torch

    if not torch.cuda.is_available():
        raise Unsupported("torch has no CUDA device")
    return torch


def _torch_fields(torch, case: Case) -> dict:
    return {k: torch.from_numpy(v.copy()).to("cuda") for k, v in case.fields.items()}


def _torch(case: Case):
    torch = _torch_module()
    return SlicingRunner(
        case, _torch_fields(torch, case), _step_for(case), lambda t: t.cpu().numpy(), torch.cuda.synchronize, torch_event_clock
    )


def _torch_compile(case: Case):
    """torch.compile of the in-place update a user would write; buffers are swapped in Python."""
    torch = _torch_module()
    names = tuple(case.fields)
    if case.is_sweep:
        plan, grid = case.plan, case.grid

        def update(*arrays):
            fields = dict(zip(names, arrays))
            fields[plan.out][grid.interior] = sweep_rhs(plan, grid, fields)

        compiled = torch.compile(update, dynamic=False)
        a, b = case.swap

        def step(fields: dict) -> dict:
            compiled(*(fields[n] for n in names))
            fields[a], fields[b] = fields[b], fields[a]
            return fields

    else:
        op = case.plan

        def update(u, *outs):
            operator_apply(op, u, list(outs))

        compiled = torch.compile(update, dynamic=False)
        outs = [d.out for d in op.outputs]

        def step(fields: dict) -> dict:
            compiled(fields["u"], *(fields[o] for o in outs))
            return fields

    return SlicingRunner(case, _torch_fields(torch, case), step, lambda t: t.cpu().numpy(), torch.cuda.synchronize, torch_event_clock)


def _jax_module(case: Case):
    _need("jax", "jax")
    # JAX would otherwise reserve most of the GPU's memory at import, starving every other implementation
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax

    if case.grid.dtype == np.float64:
        jax.config.update("jax_enable_x64", True)
    if not any(d.platform == "gpu" for d in jax.devices()):
        raise Unsupported("jax has no GPU backend (jax[cuda] is not installed)")
    return jax


@dataclass
class JaxRunner:
    """Sweeps: one jitted lax.fori_loop over n steps (n is traced, so one compile serves every batch).
    Axis operators: one jitted application per step, since a loop over a loop-invariant
    computation could legally be hoisted by XLA and would time nothing."""

    case: Case
    carry: tuple
    fn: Callable
    clock: Clock = wall_clock

    def run(self, steps: int) -> None:
        if self.case.is_sweep:
            self.carry = self.fn(self.carry, steps)
        else:
            for _ in range(steps):
                self.carry = (self.carry[0], *self.fn(self.carry[0]))

    def sync(self) -> None:
        for a in self.carry:
            a.block_until_ready()

    def latest(self) -> dict[str, np.ndarray]:
        names = tuple(self.case.fields)
        return {name: np.array(self.carry[names.index(name)], copy=True) for name in self.case.outputs}


def _jax(case: Case):
    jax = _jax_module(case)
    device = next(d for d in jax.devices() if d.platform == "gpu")
    names = tuple(case.fields)
    carry = tuple(jax.device_put(case.fields[n], device) for n in names)
    if case.is_sweep:
        step = sweep_step(case, jax_set)

        def body(_, arrays):
            fields = step(dict(zip(names, arrays)))
            return tuple(fields[n] for n in names)

        fn = jax.jit(lambda arrays, n: jax.lax.fori_loop(0, n, body, arrays), donate_argnums=0)
    else:
        op = case.plan
        outs = [d.out for d in op.outputs]
        if names != ("u", *outs):
            raise Unsupported(f"unexpected field order {names}")
        fn = jax.jit(lambda u: tuple(operator_apply(op, u, [jax.numpy.empty_like(u) for _ in outs], jax_set)))
    return JaxRunner(case, carry, fn)


# ---------------------------------------------------------------- naive CUDA kernel


def _literal(value: float, dtype) -> str:
    if np.dtype(dtype) == np.float32:
        return repr(float(np.float32(value))) + "f"
    return repr(float(value))


def naive_sweep_source(sweep: Sweep, grid: Grid) -> str:
    """One thread per interior cell, linear index decomposed with the sizes baked in, no shared memory."""
    real = "float" if grid.dtype == np.float32 else "double"
    g, nd = grid.ghost, grid.ndim
    padded = grid.padded_shape
    strides = [int(np.prod(padded[a + 1 :])) for a in range(nd)]
    decompose, rest = [], "idx"
    for a in reversed(range(nd)):
        if a == 0:
            decompose.append(f"    const long long i0 = {rest};")
        else:
            decompose.append(f"    const long long i{a} = {rest} % {grid.shape[a]}LL;")
            decompose.append(f"    const long long r{a} = {rest} / {grid.shape[a]}LL;")
            rest = f"r{a}"
    centre = " + ".join(f"(i{a} + {g}) * {strides[a]}LL" for a in range(nd))
    parts = []
    for term in sweep.terms:
        terms = " + ".join(
            f"{_literal(float(c), grid.dtype)} * f_{term.field}[c + ({sum(o * s for o, s in zip(off, strides))}LL)]"
            for off, c in term.stencil.entries
        )
        parts.append(f"({terms}) * f_{term.factor}[c]" if term.factor else f"({terms})")
    params = ", ".join([f"{real}* out"] + [f"const {real}* f_{n}" for n in sweep.inputs])
    return "\n".join(
        [
            f'extern "C" __global__ void peer_naive({params})',
            "{",
            "    const long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;",
            f"    if (idx >= {grid.cells}LL) return;",
            *decompose,
            f"    const long long c = {centre};",
            f"    out[c] = {' + '.join(parts)};",
            "}",
        ]
    )


def naive_operator_source(op: AxisOperator, shape: tuple[int, int], dtype) -> str:
    """One thread per cell; closure rows chosen by branching on the position along the axis."""
    real = "float" if np.dtype(dtype) == np.float32 else "double"
    n0, n1 = shape
    n, stride = (n1, 1) if op.axis == 1 else (n0, n1)
    pos = "j" if op.axis == 1 else "i"

    def combo(weights, scale) -> str:
        s = " + ".join(f"{_literal(float(w), dtype)} * u[idx + ({o * stride}LL)]" for o, w in weights)
        return f"({s}) * {_literal(scale, dtype)}"

    lines = []
    for m, d in enumerate(op.outputs):
        branches = [(f"{pos} == {k}", row) for k, row in enumerate(d.left)]
        branches += [(f"{pos} == {n - 1 - k}", row) for k, row in enumerate(d.right)]
        chain = "    "
        for cond, row in branches:
            lines.append(f"{chain}if ({cond}) o{m}[idx] = {combo(row, d.scale)};")
            chain = "    else "
        lines.append(f"{chain}o{m}[idx] = {combo(d.interior, d.scale)};")
    outs = ", ".join(f"{real}* o{m}" for m in range(len(op.outputs)))
    return "\n".join(
        [
            f'extern "C" __global__ void peer_naive(const {real}* u, {outs})',
            "{",
            "    const long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;",
            f"    if (idx >= {n0 * n1}LL) return;",
            f"    const long long i = idx / {n1}LL, j = idx % {n1}LL;",
            *lines,
            "}",
        ]
    )


def _naive_cuda(case: Case):
    cupy = _cupy_module()
    fields = {k: cupy.asarray(v) for k, v in case.fields.items()}
    threads = 256
    blocks = (case.cells + threads - 1) // threads
    if case.is_sweep:
        kernel = cupy.RawKernel(naive_sweep_source(case.plan, case.grid), "peer_naive")
        plan, (a, b) = case.plan, case.swap

        def step(f: dict) -> dict:
            kernel((blocks,), (threads,), (f[plan.out], *(f[n] for n in plan.inputs)))
            f[a], f[b] = f[b], f[a]
            return f

    else:
        op = case.plan
        kernel = cupy.RawKernel(naive_operator_source(op, case.grid.shape, case.grid.dtype), "peer_naive")
        outs = [d.out for d in op.outputs]

        def step(f: dict) -> dict:
            kernel((blocks,), (threads,), (f["u"], *(f[o] for o in outs)))
            return f

    return SlicingRunner(case, fields, step, cupy.asnumpy, cupy.cuda.Device().synchronize, cupy_event_clock)


# ---------------------------------------------------------------- CPU stencil compilers


@functools.cache
def _libm() -> ctypes.CDLL:
    """The C maths library, looked up once: find_library runs ldconfig, about a millisecond that would
    otherwise be timed with every batch of a peer's steps."""
    return ctypes.CDLL(ctypes.util.find_library("m"))


@contextlib.contextmanager
def _keeping_fp_env():
    """Restore this thread's floating-point environment after code that turns flush-to-zero on for it
    (loading a library linked with -ffast-math, as pystencils builds its kernels; Devito's operators
    themselves), which would otherwise change our results and every later computation here."""
    libm = _libm()
    env = ctypes.create_string_buffer(256)  # larger than any fenv_t
    if libm.fegetenv(env) != 0:
        raise Unsupported("cannot save the floating-point environment around a fast-math library")
    try:
        yield
    finally:
        libm.fesetenv(env)


def _swept(case: Case) -> tuple[Sweep, str, str, bool]:
    """The sweep, its swapped pair (newest, other) and whether it is a leapfrog (reads the level it
    overwrites); Unsupported for what these peers do not express."""
    plan = case.plan
    assert isinstance(plan, Sweep) and case.swap is not None, "axis operators are expressed apart"
    a, b = case.swap
    if plan.stencil_inputs != (a,):
        raise Unsupported("only sweeps whose stencil reads the swapped field alone are expressed here")
    return plan, a, b, b in plan.inputs


def _update(plan: Sweep, at: Callable[[str, tuple[int, ...]], object]):
    """The sweep's right-hand side as a symbolic expression, `at(field, offset)` giving each access."""
    centre = (0,) * plan.ndim
    expr = 0
    for term in plan.terms:
        part = sum(float(c) * at(term.field, o) for o, c in term.stencil.entries)
        expr += part * at(term.factor, centre) if term.factor is not None else part
    return expr


@dataclass
class TimeLoopRunner:
    """A compiled time loop over a ring of buffers, as these libraries run one: `advance(t0, n)` makes
    n steps from time index t0; the newest state is buffer (t0 + steps) % len(buffers)."""

    case: Case
    buffers: list
    advance: Callable[[int, int], None]
    t: int
    clock: Clock = wall_clock

    def run(self, steps: int) -> None:
        self.advance(self.t, steps)
        self.t += steps

    def sync(self) -> None:
        pass

    def latest(self) -> dict[str, np.ndarray]:
        return {self.case.outputs[0]: np.array(self.buffers[self.t % len(self.buffers)], copy=True)}


@dataclass
class KernelsRunner:
    """Compiled kernels, each bound to its arrays, called in turn once per step (an axis operator's regions)."""

    case: Case
    fields: dict[str, np.ndarray]
    kernels: list[Callable[[], object]]
    clock: Clock = wall_clock

    def run(self, steps: int) -> None:
        with _keeping_fp_env():  # pystencils' kernels are linked with -ffast-math; Devito's turn flush-to-zero on
            for _ in range(steps):
                for kernel in self.kernels:
                    kernel()

    def sync(self) -> None:
        pass

    def latest(self) -> dict[str, np.ndarray]:
        return {name: np.array(self.fields[name], copy=True) for name in self.case.outputs}


def closure_rows(op: AxisOperator) -> tuple[int, int, list[tuple[int, list]]]:
    """(left, right, rows): how many rows at each end are not interior rows for every output, and for each
    such row (k from the start, -1 - k from the end) every output's weights there; an output with
    fewer closure rows than another has its interior weights on the rows between."""
    nl, nr = max(len(d.left) for d in op.outputs), max(len(d.right) for d in op.outputs)

    def pick(rows: tuple, k: int, interior: tuple) -> tuple:
        return rows[k] if k < len(rows) else interior

    rows = [(k, [pick(d.left, k, d.interior) for d in op.outputs]) for k in range(nl)]
    rows += [(-1 - k, [pick(d.right, k, d.interior) for d in op.outputs]) for k in range(nr)]
    return nl, nr, rows


def _along(op: AxisOperator, o: int) -> tuple[int, ...]:
    return tuple(o if a == op.axis else 0 for a in range(op.ndim))


def _devito(case: Case):
    """Devito's Operator with OpenMP (its default compiler and optimisation level), the update written
    term by term with our coefficients and, for a sweep, the time loop inside the operator."""
    _need("devito", "devito")
    import devito

    devito.configuration["language"] = "openmp"
    devito.configuration["log-level"] = "ERROR"
    if not case.is_sweep:
        return _devito_operator(case, devito)
    plan, a, b, leapfrog = _swept(case)
    grid, g = case.grid, case.grid.ghost
    dgrid = devito.Grid(shape=grid.shape, dtype=grid.dtype.type)
    dims, t = dgrid.dimensions, dgrid.stepping_dim
    u = devito.TimeFunction(name="u", grid=dgrid, space_order=g, time_order=2 if leapfrog else 1)
    static = {}
    for name in plan.inputs:
        if name not in (a, b):
            static[name] = devito.Function(name=f"s_{name}", grid=dgrid, space_order=g)
            static[name].data_with_halo[:] = case.fields[name]

    def at(name, offset):
        index = tuple(d + o for d, o in zip(dims, offset))
        if name in (a, b):
            return u[(t if name == a else t - 1, *index)]
        return static[name][index]

    expr = _update(plan, at)
    op = devito.Operator([devito.Eq(u.forward, expr)])
    with _keeping_fp_env():
        _ = op.cfunction  # compiles and loads the kernel now, not inside a timed call
    nbuf = u.data_with_halo.shape[0]
    t0 = 1 if leapfrog else 0  # time t0 - 1 (the older level) is buffer 0
    if leapfrog:
        u.data_with_halo[0] = case.fields[b]
        u.data_with_halo[1] = case.fields[a]
        u.data_with_halo[2] = case.fields[b]  # its ghost cells: the walls
    else:
        u.data_with_halo[0] = case.fields[a]
        u.data_with_halo[1] = case.fields[b]
    buffers = [u.data_with_halo[k] for k in range(nbuf)]

    def advance(t: int, n: int) -> None:
        with _keeping_fp_env():  # the operator turns flush-to-zero on in its calling thread
            op.apply(time_m=t, time_M=t + n - 1)

    return TimeLoopRunner(case, buffers, advance, t0)


def _devito_operator(case: Case, devito) -> KernelsRunner:
    """An axis operator as one Devito Operator: an equation per output and region (the interior rows, each
    closure row), a region a SubDomain, so Devito fuses the outputs of a region into one loop. Applied once
    per step: no time loop to put inside, so its argument processing in Python counts, as a user's would."""
    op, shape = case.plan, case.grid.shape
    assert isinstance(op, AxisOperator), "called for axis operators only"
    n, dgrid = shape[op.axis], devito.Grid(shape=shape, dtype=case.grid.dtype.type)

    class Band(devito.SubDomain):
        """Rows lo .. n-1-hi along the operator's axis, every row across it."""

        def __init__(self, lo: int, hi: int):
            self.lo, self.hi, self.name = lo, hi, f"band_{lo}_{hi}"
            super().__init__(grid=dgrid)

        def define(self, dimensions):
            return {d: ("middle", self.lo, self.hi) if a == op.axis else d for a, d in enumerate(dimensions)}

    width = max(abs(o) for d in op.outputs for row in (d.interior, *d.left, *d.right) for o, _ in row)
    u = devito.Function(name=op.inp, grid=dgrid, space_order=width)
    u.data[:] = case.fields[op.inp]
    outs = [devito.Function(name=d.out, grid=dgrid, space_order=width) for d in op.outputs]
    nl, nr, rows = closure_rows(op)
    bands = [(Band(nl, nr), [d.interior for d in op.outputs])]
    bands += [(Band(k % n, n - 1 - k % n), weights) for k, weights in rows]

    def at(o: int):
        return u[tuple(x + s for x, s in zip(dgrid.dimensions, _along(op, o)))]

    eqs = [
        devito.Eq(out, sum(float(w) * at(o) for o, w in row) * float(d.scale), subdomain=band)
        for band, weights in bands
        for d, out, row in zip(op.outputs, outs, weights)
    ]
    operator = devito.Operator(eqs)
    with _keeping_fp_env():
        _ = operator.cfunction  # compiles and loads the kernel now, not inside a timed call
    return KernelsRunner(case, {f.name: f.data for f in (u, *outs)}, [operator.apply])


def _pystencils_cpu_config(ps, **space):
    """A kernel vectorised for this CPU with OpenMP over `space` (its ghost layers or iteration slice)."""
    config = ps.CreateKernelConfig(target=ps.Target.CurrentCPU, **space)
    config.cpu.openmp.enable = True
    config.cpu.vectorize.enable = True
    config.cpu.vectorize.assume_inner_stride_one = True
    return config


def _pystencils_gpu_config(ps, **space):
    """A kernel for pystencils' CUDA target (its default indexing and block size) over `space`."""
    return ps.CreateKernelConfig(target=ps.Target.CUDA, **space)


def _pystencils_operator_kernels(case: Case, ps, config) -> list:
    """An axis operator as compiled pystencils kernels: one over the interior rows writing every output (one pass,
    as ours), then one per closure row index along the axis, over that slice of the grid; each is called with the
    input and every output as keywords."""
    op, dtype = case.plan, case.grid.dtype.name
    assert isinstance(op, AxisOperator), "called for axis operators only"
    fields = {n: ps.fields(f"{n}: {dtype}[{op.ndim}D]", layout="c") for n in case.fields}

    def assignments(weights: list) -> list:
        """Each output's weighted sum into a local, then scaled, as the NumPy peer does (sympy would
        distribute the scale over a sum, rounding differently)."""
        out = []
        for d, row in zip(op.outputs, weights):
            acc = ps.TypedSymbol(f"{d.out}_sum", dtype)
            out.append(ps.Assignment(acc, sum(float(w) * fields[op.inp][_along(op, o)] for o, w in row)))
            out.append(ps.Assignment(fields[d.out].center, acc * float(d.scale)))
        return out

    nl, nr, rows = closure_rows(op)
    regions = [({"ghost_layers": [(nl, nr) if a == op.axis else 0 for a in range(op.ndim)]}, [d.interior for d in op.outputs])]
    regions += [({"iteration_slice": tuple(k if a == op.axis else slice(None) for a in range(op.ndim))}, w) for k, w in rows]
    with _keeping_fp_env():
        return [ps.create_kernel(assignments(w), config(ps, **space)).compile() for space, w in regions]


def _pystencils_sweep_kernel(case: Case, ps, config):
    """A sweep as one compiled pystencils kernel reading the swapped pair's newest level `a` and writing `b`;
    called with every field it reads and `b` as keywords. Returns (kernel, a, b, the other fields it reads)."""
    plan, a, b, _ = _swept(case)
    grid = case.grid
    fields = {n: ps.fields(f"{n}: {grid.dtype.name}[{grid.ndim}D]", layout="c") for n in plan.inputs + (b,)}
    update = ps.Assignment(fields[b].center, _update(plan, lambda name, offset: fields[name][offset]))
    with _keeping_fp_env():
        kernel = ps.create_kernel([update], config(ps, ghost_layers=grid.ghost)).compile()
    return kernel, a, b, tuple(n for n in plan.inputs if n not in (a, b))


def _pystencils(case: Case):
    """pystencils: a sweep is one kernel, vectorised for this CPU with OpenMP, called with source and
    destination alternated from Python (as its examples run a time loop); an axis operator, kernels
    over its interior and closure rows."""
    _need("pystencils", "pystencils")
    import pystencils as ps

    if not case.is_sweep:
        arrays = {n: a.copy() for n, a in case.fields.items()}
        kernels = _pystencils_operator_kernels(case, ps, _pystencils_cpu_config)
        return KernelsRunner(case, arrays, [functools.partial(kernel, **arrays) for kernel in kernels])
    kernel, a, b, others = _pystencils_sweep_kernel(case, ps, _pystencils_cpu_config)
    static = {n: case.fields[n].copy() for n in others}
    buffers = [case.fields[a].copy(), case.fields[b].copy()]

    def advance(t: int, n: int) -> None:
        for k in range(t, t + n):
            kernel(**static, **{a: buffers[k % 2], b: buffers[(k + 1) % 2]})

    return TimeLoopRunner(case, buffers, advance, 0)


def _pystencils_gpu(case: Case):
    """pystencils' CUDA target: the CPU peer's kernels generated for the GPU and launched by its CuPy runtime,
    source and destination alternated from Python; an axis operator, its kernels over interior and closure rows."""
    cupy = _cupy_module()
    _need("pystencils", "pystencils")
    import pystencils as ps

    fields = {k: cupy.asarray(v) for k, v in case.fields.items()}
    if case.is_sweep:
        kernel, a, b, others = _pystencils_sweep_kernel(case, ps, _pystencils_gpu_config)

        def step(f: dict) -> dict:
            kernel(**{n: f[n] for n in (*others, a, b)})
            f[a], f[b] = f[b], f[a]
            return f

    else:
        kernels = _pystencils_operator_kernels(case, ps, _pystencils_gpu_config)

        def step(f: dict) -> dict:
            for kernel in kernels:
                kernel(**f)
            return f

    return SlicingRunner(case, fields, step, cupy.asnumpy, cupy.cuda.Device().synchronize, cupy_event_clock)


PEERS = {
    p.name: p
    for p in (
        Peer("numpy", "cpu", "NumPy slicing", _numpy),
        Peer("devito", "cpu", "Devito Operator (OpenMP), a sweep's time loop inside", _devito),
        Peer("pystencils", "cpu", "pystencils kernels (vectorised, OpenMP): buffers alternated, or a kernel per region", _pystencils),
        Peer("cupy", "gpu", "CuPy slicing", _cupy),
        Peer("naive-cuda", "gpu", "hand-written one-thread-per-cell CUDA kernel (cupy.RawKernel)", _naive_cuda),
        Peer("torch", "gpu", "PyTorch eager slicing", _torch),
        Peer("torch.compile", "gpu", "torch.compile of the slicing update", _torch_compile),
        Peer("jax", "gpu", "jax.jit with lax.fori_loop", _jax),
        Peer("pystencils-gpu", "gpu", "pystencils' CUDA target launched through CuPy: buffers alternated, or a kernel per region",
             _pystencils_gpu),
    )
}
DEFAULT_GPU = ("cupy", "naive-cuda", "torch", "torch.compile", "jax", "pystencils-gpu")
QUICK_GPU = ("cupy", "naive-cuda", "torch")
DEFAULT_CPU = ("numpy", "devito", "pystencils")  # skipped, with a note, where not installed
QUICK_CPU = ("numpy",)
