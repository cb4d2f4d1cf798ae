"""What one step computes, as data every backend reads: no backend code here.

A `Sweep` writes the interior of one ghosted field as a sum of terms
(coefficient-carrying stencil applied to a field, optionally multiplied
pointwise by another field). An `AxisOperator` applies one-axis derivative
stencils with one-sided closures near both ends to an unpadded array, for
several outputs in a single pass over the input. Both are derived from a
problem's analysed equations (`ir.lowering`, `nodes.OneSided`) and handed to
the backends' hand-scheduled kernels.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

from .errors import StencilforgeError
from .stencil import Stencil


@dataclass(frozen=True)
class Term:
    """stencil(field) * factor, where factor is a pointwise field or None."""

    field: str
    stencil: Stencil
    factor: str | None = None

    def __post_init__(self) -> None:
        for what, name in (("field", self.field), ("factor", self.factor)):
            if name is None and what == "factor":
                continue
            if not isinstance(name, str) or not name.isidentifier():
                raise StencilforgeError(f"a term's {what} must be a field name (an identifier), got {name!r}")
        if not isinstance(self.stencil, Stencil):
            raise StencilforgeError(f"a term's stencil must be a Stencil, got {type(self.stencil).__name__}")


@dataclass(frozen=True)
class Sweep:
    """out[interior] = sum of terms evaluated at each interior cell."""

    out: str
    terms: tuple[Term, ...]

    def __post_init__(self) -> None:
        if not self.terms:
            raise StencilforgeError("a sweep needs at least one term")
        if len({t.stencil.ndim for t in self.terms}) != 1:
            raise StencilforgeError("all terms of a sweep must have the same dimension")
        for t in self.terms:
            if t.field == self.out and set(t.stencil.as_dict()) != {(0,) * self.ndim}:
                raise StencilforgeError(f"sweep writes {self.out!r} in place but reads it at neighbouring cells")

    @property
    def ndim(self) -> int:
        return self.terms[0].stencil.ndim

    @property
    def radius(self) -> int:
        return max(t.stencil.radius for t in self.terms)

    @property
    def inputs(self) -> tuple[str, ...]:
        """Every field the sweep reads, in a fixed order (the kernel argument order)."""
        names = []
        for t in self.terms:
            for name in (t.field, t.factor):
                if name is not None and name not in names:
                    names.append(name)
        return tuple(names)

    @property
    def stencil_inputs(self) -> tuple[str, ...]:
        """Fields read at neighbouring cells: their ghost layers must be current."""
        return tuple(
            dict.fromkeys(t.field for t in self.terms if set(t.stencil.as_dict()) != {(0,) * self.ndim})
        )

    @property
    def iterates_one_field(self) -> bool:
        """One field read around the cell and the output not read (as a leapfrog reads its older
        level): what two steps fused into one pass, S(S(u)), need of the sweep itself."""
        return len(self.stencil_inputs) == 1 and self.out not in self.inputs

    def composes_with(self, swap: tuple[str, str] | None) -> bool:
        """Whether two steps, with `swap` exchanged between them, are this sweep applied twice to one
        field: it iterates one field, and the output is swapped with that field."""
        return swap is not None and self.iterates_one_field and set(swap) == {self.out, *self.stencil_inputs}

    def bytes_per_cell(self, itemsize: int) -> int:
        """Compulsory traffic: every distinct field read once, the output written once."""
        return itemsize * (len(set(self.inputs)) + 1)

    def flops_per_cell(self) -> int:
        """One multiply and one add per stencil point, one multiply per pointwise factor."""
        return sum(2 * len(t.stencil.entries) + (1 if t.factor else 0) for t in self.terms)


Weights1D = tuple[tuple[int, Fraction | float], ...]  # (offset along the axis, weight)


@dataclass(frozen=True)
class Derivative1D:
    """A derivative along one axis: interior weights and one-sided closure rows.

    left[k] gives the weights for row k (offsets relative to that row); right[k]
    for row n-1-k. `scale` is 1/h**order, applied after the weighted sum.
    """

    out: str
    interior: Weights1D
    left: tuple[Weights1D, ...]
    right: tuple[Weights1D, ...]
    scale: float

    @property
    def radius(self) -> int:
        return max(abs(o) for o, _ in self.interior)


@dataclass(frozen=True)
class AxisOperator:
    """Several one-axis derivatives of one input, computed in one pass."""

    inp: str
    axis: int
    ndim: int
    outputs: tuple[Derivative1D, ...]

    @property
    def min_length(self) -> int:
        """The shortest axis for which closures and interior rows do not overlap."""
        need = 1
        for d in self.outputs:
            width = max([abs(o) for row in d.left + d.right for o, _ in row] + [d.radius])
            need = max(need, len(d.left) + len(d.right) + 1, width + 1)
        return need

    @property
    def halo(self) -> int:
        """Layers of neighbours' values a block needs at a cut along the axis: the reach, and room for the closure
        rows, which there fall on cells that are then discarded."""
        return max(max(d.radius, len(d.left), len(d.right)) for d in self.outputs)

    def bytes_per_cell(self, itemsize: int) -> int:
        return itemsize * (1 + len(self.outputs))

    def flops_per_cell(self) -> int:
        return sum(2 * len(d.interior) + 1 for d in self.outputs)


def anonymous(plan: Sweep | AxisOperator) -> Sweep | AxisOperator:
    """The plan with its arrays named by their place (inputs f0, f1, ... in argument order; outputs out0, out1, ...):
    what a kernel computes, whatever a problem calls its fields (a run's slot u_next, the bench's u_new), so that a
    tuned winner is found for every plan of the same structure."""
    if isinstance(plan, AxisOperator):
        return replace(plan, inp="f0", outputs=tuple(replace(d, out=f"out{i}") for i, d in enumerate(plan.outputs)))
    names = {name: f"f{i}" for i, name in enumerate(plan.inputs)}
    names.setdefault(plan.out, "out0")
    return Sweep(names[plan.out], tuple(Term(names[t.field], t.stencil, None if t.factor is None else names[t.factor])
                                        for t in plan.terms))
