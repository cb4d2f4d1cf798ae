"""The per-user tuning cache: winners of `stencilforge tune`, looked up by the cuda backend's `auto`.

One JSON file, `tune.json`, in $STENCILFORGE_CACHE_DIR or ~/.cache/stencilforge.
An entry is keyed by device name, plan signature, shape class, dtype and
digest of the kernels the plan generates, so a winner never outlives the code or the card it was
measured on. The plan signature describes the stencil's structure (fields,
factors, offsets, axis, outputs) and not its coefficients, which change with
grid spacing and time step without changing the best launch shape; the shape
class rounds each axis to the nearest power of two. A generated pass is keyed
by its default kernel's source with the literals masked (`pass_key`): the
source is the pass's structure. This module imports no backend, so the cuda
backend can import it without depending on `bench`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import numpy as np

from .cache import cache_dir, write_atomic
from .plan import AxisOperator, Sweep, anonymous

FILENAME = "tune.json"


def shape_class(shape) -> str:
    """Each axis rounded to the nearest power of two ('16384x16384'); 'any' when the shape is unknown."""
    if shape is None:
        return "any"
    return "x".join(str(2 ** round(math.log2(max(1, int(n))))) for n in shape)


def plan_signature(plan: Sweep | AxisOperator) -> str:
    """A readable prefix plus a hash of the plan's structure (no coefficient values, no field names: `plan.anonymous`)."""
    structure: tuple
    plan = anonymous(plan)
    if isinstance(plan, Sweep):
        structure = (plan.ndim, plan.out, tuple((t.field, t.factor, tuple(sorted(o for o, _ in t.stencil.entries))) for t in plan.terms))
        points = sum(len(t.stencil.entries) for t in plan.terms)
        prefix = f"sweep{plan.ndim}d-r{plan.radius}-{len(plan.inputs)}in-{points}pt"
    else:
        structure = (plan.ndim, plan.axis, tuple((d.out, tuple(o for o, _ in d.interior), len(d.left), len(d.right)) for d in plan.outputs))
        radius = max(d.radius for d in plan.outputs)
        prefix = f"axis{plan.axis}-r{radius}-{len(plan.outputs)}out"
    digest = hashlib.sha256(repr(structure).encode()).hexdigest()[:10]
    return f"{prefix}-{digest}"


def cache_key(device_name: str, plan: Sweep | AxisOperator, shape, dtype, code: str) -> str:
    """`code`: a digest of the kernels the plan generates (the cuda backend's `code_signature`)."""
    return "|".join((device_name, plan_signature(plan), shape_class(shape), np.dtype(dtype).name, code))


# a CUDA source's floating-point literals (`float.hex`, with the f of float32): coefficients, not structure
_LITERAL = re.compile(r"-?0x[0-9a-f]+(?:\.[0-9a-f]*)?p[+-]?[0-9]+f?")


def pass_key(device_name: str, source: str, shape, dtype) -> str:
    """The key of a generated pass's tuned schedule: `source` is its kernel with the printer's default schedule."""
    digest = hashlib.sha256(_LITERAL.sub("L", source).encode()).hexdigest()[:16]
    return "|".join((device_name, f"pass-{digest}", shape_class(shape), np.dtype(dtype).name))


def tune_file() -> Path:
    """The JSON file holding every tuned winner."""
    return cache_dir() / FILENAME


def load_entries() -> dict:
    """Every cached entry; an unreadable or corrupt file counts as empty (it is only a cache)."""
    try:
        data = json.loads(tune_file().read_text())
    except (OSError, ValueError):
        return {}
    return data.get("entries", {}) if isinstance(data, dict) else {}


def store_entry(key: str, entry: dict) -> str:
    """Record a winner under `key` (atomic replace of the file); returns the key."""
    entries = load_entries()
    entries[key] = entry
    write_atomic(tune_file(), json.dumps({"entries": entries}, indent=1, sort_keys=True).encode())
    return key


def store_choice(device_name: str, plan, shape, dtype, code: str, strategy: str, tile, details: dict | None = None) -> str:
    """Record a sweep's or axis operator's winner; returns its key."""
    return store_entry(cache_key(device_name, plan, shape, dtype, code),
                       {"strategy": strategy, "tile": list(tile) if tile is not None else None, **(details or {})})


def cached_pass_schedule(key: str) -> dict | None:
    """The schedule (`printers.cuda.pass_source`'s keywords and the block) tuned under a `pass_key`, or None."""
    hit = load_entries().get(key)
    if not isinstance(hit, dict) or not isinstance(hit.get("schedule"), dict):
        return None
    schedule = dict(hit["schedule"])
    schedule["block"] = tuple(schedule["block"])
    return schedule


def cached_choice(device_name: str, plan: Sweep | AxisOperator, shape, dtype, code: str) -> tuple[str, tuple[int, ...] | None] | None:
    """(strategy, tile) tuned for this device, plan, shape class, dtype and generated code, or None."""
    hit = load_entries().get(cache_key(device_name, plan, shape, dtype, code))
    if hit is None:
        return None
    tile = hit.get("tile")
    return hit["strategy"], tuple(tile) if tile is not None else None
