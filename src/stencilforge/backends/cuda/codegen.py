"""CUDA C generated from the plan: the schedules that apply to a plan (the registry in `schedules/`),
their default tiles, and the one entry point per kind of kernel (sweep, derivative operator).

The schedules live one module each in `schedules/`, each declaring the plans it applies to;
what they share (the `Kernel` and `Schedule` records, the printer of a cell's right-hand side,
indexing) in `kernel.py`. `generated` names the printer of any pass (`printers.cuda`), which
applies to every pass: asked for, it runs a linear pass as a generated pass instead of a sweep.
"""

from __future__ import annotations

import hashlib
from typing import Callable

from ...errors import StencilforgeError
from ...plan import AxisOperator, Sweep, Term, anonymous
from ...stencil import Stencil
from .kernel import HOPPER, MAX_THREADS, Kernel, Limits, Schedule, check_names
from .schedules import OPERATORS, SWEEPS

GENERATED = "generated"
SWEEP_STRATEGIES = tuple(s.name for s in SWEEPS)
OPERATOR_STRATEGIES = tuple(s.name for s in OPERATORS)
STRATEGIES = tuple(dict.fromkeys(SWEEP_STRATEGIES + OPERATOR_STRATEGIES + (GENERATED,)))
SCALAR_OF = {s.name: s.scalar for s in SWEEPS + OPERATORS if s.scalar}  # what runs where a vector kernel's rows do not fit
_BY_KIND = {"sweep": ({s.name: s for s in SWEEPS}, "a stencil sweep"),
            "operator": ({s.name: s for s in OPERATORS}, "a derivative operator")}


def _table(plan: Sweep | AxisOperator) -> tuple[dict[str, Schedule], str]:
    """The registered schedules of the plan's kind by name, and what the kind is called in messages."""
    return _BY_KIND["operator" if isinstance(plan, AxisOperator) else "sweep"]


def schedule(plan: Sweep | AxisOperator, strategy: str) -> Schedule:
    """The registered schedule `strategy` of the plan's kind, or a one-line refusal naming those there are."""
    table, what = _table(plan)
    if strategy not in table:
        raise StencilforgeError(f"strategy {strategy!r} does not apply to {what}: choose one of {', '.join(table)}")
    return table[strategy]


def code_signature(plan: Sweep | AxisOperator, dtype) -> str:
    """A digest of what every applicable strategy generates for the plan's structure (default
    tiles, every coefficient 1, fields named by their place: `plan.anonymous`): a tuned winner is kept only
    while the code it was measured on is (the device, whose limits also shape the code, is a key of its own)."""
    plan = anonymous(plan)
    if isinstance(plan, Sweep):
        unit = Sweep(plan.out, tuple(Term(t.field, Stencil.from_dict({o: 1.0 for o, _ in t.stencil.entries}), t.factor)
                                     for t in plan.terms))
        sources = [sweep_kernel(unit, s, dtype).source for s in applicable_strategies(unit, dtype)]
    else:
        sources = [operator_kernel(plan, s, dtype).source for s in applicable_strategies(plan, dtype)]
    return hashlib.sha256("\0".join(sources).encode()).hexdigest()[:16]


def applicable_strategies(plan: Sweep | AxisOperator, dtype) -> tuple[str, ...]:
    """The registered schedules of the plan's kind that apply to it (`Schedule.applies`), in registry order."""
    table, _ = _table(plan)
    return tuple(name for name, s in table.items() if s.applies(plan, dtype) is None)


def takes_sweep(sweep: Sweep, dtype, strategy: str) -> bool:
    """Whether a linear pass runs as a sweep when `strategy` is asked for: some registered schedule applies
    (2D and 3D sweeps) and the strategy is not `generated`. A strategy that does not apply is refused by
    `sweep_kernel`, in one line."""
    return strategy != GENERATED and bool(applicable_strategies(sweep, dtype))


def default_tile(plan: Sweep | AxisOperator, strategy: str, dtype="float32") -> tuple[int, ...]:
    """The schedule's own tile for the plan (each module says which measurements chose it)."""
    return tuple(schedule(plan, strategy).tile(plan, dtype))


def _check_tile(tile, expected: int, strategy: str, threads: Callable[[tuple[int, ...]], int]) -> tuple[int, ...]:
    try:
        tile = tuple(int(t) for t in tile)
    except (TypeError, ValueError):
        raise StencilforgeError(f"tile must be a sequence of integers, got {tile!r}") from None
    if len(tile) != expected or any(t < 1 for t in tile):
        raise StencilforgeError(f"strategy {strategy} needs a tile of {expected} positive integers, got {tile}")
    if threads(tile) > MAX_THREADS:
        raise StencilforgeError(f"tile {tile} gives {threads(tile)} threads per block; the limit is {MAX_THREADS}")
    return tile


def _kernel(plan: Sweep | AxisOperator, strategy: str, dtype, tile=None, limits: Limits = HOPPER) -> Kernel:
    """The kernel of `plan` with one registered schedule (its default tile unless `tile`), its shared memory
    within `limits` (the backend passes its device's; without a device, sm_90's)."""
    s = schedule(plan, strategy)
    names = [d.out for d in plan.outputs] + [plan.inp] if isinstance(plan, AxisOperator) else [*plan.inputs, plan.out]
    check_names(names)
    why = s.applies(plan, dtype)
    if why:
        raise StencilforgeError(why)
    tile = s.tile(plan, dtype) if tile is None else tile
    tile = _check_tile(tile, s.tile_dims or plan.ndim, strategy, lambda t: s.threads(plan, dtype, t))
    if isinstance(plan, AxisOperator):
        name = f"sf_{strategy}_axis{plan.axis}_" + "_".join(d.out for d in plan.outputs)
    else:
        name = f"sf_{strategy}_{plan.out}"
    return s.build(plan, dtype, tile, name, limits)


def sweep_kernel(sweep: Sweep, strategy: str, dtype, tile=None, limits: Limits = HOPPER) -> Kernel:
    return _kernel(sweep, strategy, dtype, tile, limits)


def operator_kernel(op: AxisOperator, strategy: str, dtype, tile=None) -> Kernel:
    return _kernel(op, strategy, dtype, tile)
