"""Stop rules (`until=`): norms against a NumPy oracle, the CFD course's rules against its hand-written loop,
functions of the fields, the problem's own rule, and one-line refusals."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

import stencilforge as sf
from stencilforge.cli import app

BACKENDS = ["numpy", "numba"]


def laplace(shape=(21, 31), until=None) -> sf.Problem:
    """Step 9 of the CFD course: Jacobi sweeps of Laplace's equation on [0, 2] x [0, 1], p = 0 at x = 0, p = y at
    x = 2, dp/dy = 0 at y = 0 and 1, from p = 0."""
    grid = sf.Grid(shape, extent=(1.0, 2.0))
    p = sf.Field("p", grid)
    dy, dx = grid.spacing
    sweep = (dy**2 * (p.shift(x=1) + p.shift(x=-1)) + dx**2 * (p.shift(y=1) + p.shift(y=-1))) / (2 * (dx**2 + dy**2))
    return sf.Problem([sf.Eq(p.next, sweep)], boundary={p: (sf.Neumann(), (sf.Dirichlet(0.0), sf.Dirichlet(grid.y)))},
                      until=until(p) if until is not None else None, steps=20_000, name="laplace")


def course_loop(shape, change, target):
    """The course's loop, literally: pn = p.copy(), one sweep, walls, and stop once change(p, pn) <= target.
    Returns (iterations, p, the last change)."""
    ny, nx = shape
    dy, dx = 1.0 / ny, 2.0 / nx
    y = (np.arange(ny) + 0.5) * dy
    p = np.zeros((ny + 2, nx + 2))  # one ghost layer: the walls sit half a cell outside the first and last points
    n = 0
    while True:
        p[:, 0] = 0.0
        p[1:-1, -1] = y
        p[0, :] = p[1, :]
        p[-1, :] = p[-2, :]
        pn = p.copy()
        p[1:-1, 1:-1] = (dy**2 * (pn[1:-1, 2:] + pn[1:-1, :-2]) + dx**2 * (pn[2:, 1:-1] + pn[:-2, 1:-1])) / (2 * (dx**2 + dy**2))
        n += 1
        with np.errstate(divide="ignore", invalid="ignore"):
            value = change(p[1:-1, 1:-1], pn[1:-1, 1:-1])
        if value <= target:
            return n, p[1:-1, 1:-1], value


COURSE_RULES = {
    # the course's sum-ratio rule: sum(|p| - |pn|) / sum(|pn|)
    "sum-ratio": (lambda p: sf.total(abs(p.next) - abs(p)) / sf.total(abs(p)) <= 1e-4,
                  lambda p, pn: np.sum(np.abs(p) - np.abs(pn)) / np.sum(np.abs(pn)), 1e-4),
    # the L1 change: sum(|p - pn|) / sum(|pn|)
    "l1-change": (lambda p: sf.norm(p.next - p, 1) / sf.norm(p, 1) <= 1e-5,
                  lambda p, pn: np.sum(np.abs(p - pn)) / np.sum(np.abs(pn)), 1e-5),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(COURSE_RULES))
def test_the_courses_rules_stop_where_its_numpy_loop_does(name, backend):
    rule, change, target = COURSE_RULES[name]
    steps, want, value = course_loop((21, 31), change, target)
    result = sf.run(laplace(until=rule), backend=backend, check_every=1)
    s = result.summary
    assert s["stop"] == "until" and s["step"] == steps and s["until"]["step"] == steps and s["until"]["met"]
    assert s["until"]["value"] == pytest.approx(value, rel=1e-9) and s["until"]["bound"] == target
    np.testing.assert_allclose(result.fields["p"], want, rtol=0, atol=1e-13)


def _heat(dtype: str, until=None, initial=None) -> sf.Problem:
    """u.next = u + 0.1 laplacian(u) with a coefficient field c no equation writes."""
    grid = sf.Grid((9, 13), extent=1.0, dtype=dtype)
    u, c = sf.Field("u", grid), sf.Field("c", grid, levels=1)
    rng = np.random.default_rng(7)
    initial = initial or {u: rng.standard_normal(grid.shape), c: rng.uniform(0.5, 1.5, grid.shape)}
    return sf.Problem([sf.Eq(u.next, u + 0.1 * c * sf.laplacian(u))], initial=initial, boundary={u: sf.Periodic()},
                      until=until, steps=50)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_norms_equal_a_literal_numpy_oracle(dtype, backend):
    """One step from known arrays: each norm of u.next - c u (in the grid's dtype, as NumPy computes it) is the
    correctly rounded float64 value math.fsum gives, bit for bit."""
    problem = _heat(dtype)
    u, c = problem.fields["u"], problem.fields["c"]
    before, coeff = (problem.initial[(name, 0)].astype(dtype) for name in ("u", "c"))
    after = np.asarray(sf.run(problem, steps=1, backend=backend).fields["u"])
    d = (after - coeff * before).astype(np.float64).ravel()
    oracle = {1: math.fsum(np.abs(d)), 2: math.sqrt(math.fsum(d * d)), math.inf: float(np.max(np.abs(d)))}
    for ord, want in oracle.items():
        s = sf.run(problem, backend=backend, check_every=1, until=sf.norm(u.next - c * u, ord) >= 0).summary
        assert s["stop"] == "until" and s["step"] == 1 and s["until"]["value"] == want, ord
    s = sf.run(problem, backend=backend, check_every=1, until=sf.total(u.next - c * u) / 2 < 1e300).summary
    assert s["until"]["value"] == math.fsum(d) / 2


def _smoothing() -> sf.Problem:
    """One sweep of one field with Dirichlet walls: numba takes several steps per pass between checks."""
    grid = sf.Grid((9, 13), extent=1.0)
    u = sf.Field("u", grid)
    star = u.shift(x=1) + u.shift(x=-1) + u.shift(y=1) + u.shift(y=-1) - 4 * u
    return sf.Problem([sf.Eq(u.next, u + 0.2 * star)], initial={u: np.random.default_rng(7).standard_normal(grid.shape)},
                      boundary={u: sf.Dirichlet(0.5)}, steps=50)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rule_reads_the_levels_of_the_step_it_follows(backend):
    """At a check after step n, u is step n - 1's state and u.next step n's, also where the steps before ran several
    per pass (numba); a function of the fields gets the same levels by slot name."""
    problem = _smoothing()
    states = {n: sf.run(problem, steps=n, backend=backend).fields["u"] for n in (6, 7, 13, 14, 20, 21)}
    seen = []

    def look(fields):
        seen.append({name: np.array(arr) for name, arr in fields.items()})
        return len(seen) == 3

    sf.run(problem, backend=backend, check_every=7, steps=21)  # numba: its kernel of the steps between checks, cached
    s = sf.run(problem, backend=backend, check_every=7, until=look).summary
    assert s["stop"] == "until" and s["step"] == 21 and s["until"] == {
        "rule": "<function test_a_rule_reads_the_levels_of_the_step_it_follows.<locals>.look>", "met": True, "value": None,
        "bound": None, "step": 21}
    assert backend == "numpy" or s.get("fused_steps", 0) > 0
    for levels, step in zip(seen, (7, 14, 21)):
        assert sorted(levels) == ["u", "u_next"]
        np.testing.assert_array_equal(levels["u"], states[step - 1])
        np.testing.assert_array_equal(levels["u_next"], states[step])


def test_three_levels_read_prev_as_the_equations_do():
    grid = sf.Grid((16,), extent=1.0)
    u = sf.Field("u", grid, levels=3)
    problem = sf.Problem([sf.Eq(u.next, 2 * u - u.prev + 0.25 * sf.laplacian(u))], initial={u: sf.sin(6.283185307179586 * grid.x)},
                         boundary={u: sf.Periodic()})
    states = [np.asarray(sf.run(problem, steps=n, backend="numpy").fields["u"]) for n in (1, 2, 3)]
    s = sf.run(problem, backend="numpy", check_every=3, until=sf.norm(u.next - 2 * u + u.prev, 1) > -1).summary
    assert s["step"] == 3 and s["until"]["value"] == math.fsum(np.abs(states[2] - 2 * states[1] + states[0]))


def test_a_function_stops_where_the_same_rule_as_norms_does():
    p = laplace().fields["p"]
    by_norm = sf.run(laplace(), backend="numpy", check_every=5, until=sf.norm(p.next - p, math.inf) < 1e-5).summary
    by_function = sf.run(laplace(), backend="numpy", check_every=5,
                         until=lambda f: bool(np.abs(f["p_next"] - f["p"]).max() < 1e-5)).summary
    assert by_norm["stop"] == by_function["stop"] == "until" and by_norm["step"] == by_function["step"]
    assert by_norm["step"] % 5 == 0


def test_the_problems_own_rule_and_a_runs_rule_in_its_place():
    problem = laplace(until=lambda p: sf.norm(p.next - p, 1) / sf.norm(p, 1) < 1e-3)
    p = problem.fields["p"]
    own = sf.run(problem, backend="numpy", check_every=10).summary
    assert own["stop"] == "until" and own["until"]["rule"] == "norm(p.next - p, 1) / norm(p, 1) < 0.001"
    tighter = sf.run(problem, backend="numpy", check_every=10, until=sf.norm(p.next - p, 1) / sf.norm(p, 1) < 1e-4).summary
    assert tighter["stop"] == "until" and tighter["step"] > own["step"]
    capped = sf.run(problem, steps=20, backend="numpy", check_every=10).summary
    assert capped["stop"] == "steps" and capped["until"]["met"] is False and capped["until"]["step"] == 20


def test_a_rule_takes_the_problems_constants():
    problem = laplace(until=lambda p: sf.norm(p.next - p, 1) / sf.norm(p, 1) < sf.Constant("target", 1e-3))
    assert [c.name for c in problem.constants] == ["target"]
    loose = sf.run(problem, backend="numpy", check_every=10, params={"target": 1e-2}).summary
    assert loose["until"]["bound"] == 1e-2 and loose["step"] < sf.run(problem, backend="numpy", check_every=10).summary["step"]


def test_a_problem_file_carries_its_rule_to_the_cli(tmp_path):
    path = tmp_path / "laplace.py"
    path.write_text("import stencilforge as sf\n\n\ndef build(shape=None, dtype='float64'):\n"
                    "    grid = sf.Grid(shape or (12, 16), extent=(1.0, 2.0), dtype=dtype)\n"
                    "    p = sf.Field('p', grid)\n"
                    "    return sf.Problem([sf.Eq(p.next, 0.25 * (p.shift(x=1) + p.shift(x=-1) + p.shift(y=1) + p.shift(y=-1)))],\n"
                    "                      boundary={p: (sf.Neumann(), (sf.Dirichlet(0.0), sf.Dirichlet(grid.y)))},\n"
                    "                      until=sf.norm(p.next - p, 1) / sf.norm(p, 1) < 1e-3, steps=10000)\n")
    runner = CliRunner()
    res = runner.invoke(app, ["run", str(path), "--backend", "numpy", "--check-every", "1", "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)
    assert s["stop"] == "until" and s["until"]["met"] and s["until"]["step"] == s["step"] < 10000
    table = runner.invoke(app, ["run", str(path), "--backend", "numpy", "--check-every", "1"])
    assert table.exit_code == 0 and "norm(p.next - p, 1) / norm(p, 1) < 0.001" in table.output, table.output
    assert f"(held at step {s['step']})" in table.output


LAPLACE_FILE = ("import stencilforge as sf\n\n\ndef build(shape=None, dtype='float64'):\n"
                "    grid = sf.Grid(shape or (12, 16), extent=(1.0, 2.0), dtype=dtype)\n"
                "    p = sf.Field('p', grid)\n"
                "    return sf.Problem([sf.Eq(p.next, 0.25 * (p.shift(x=1) + p.shift(x=-1) + p.shift(y=1) + p.shift(y=-1)))],\n"
                "                      boundary={p: (sf.Neumann(), (sf.Dirichlet(0.0), sf.Dirichlet(grid.y)))}, steps=10000)\n")


@pytest.mark.parametrize("text", ["sf.total(abs(p.next) - abs(p)) / sf.total(abs(p)) <= 1e-4",
                                  "norm(p.next - p, 1) / norm(p, 1) < 1e-3"])
def test_until_on_the_command_line_stops_where_the_same_rule_from_python_does(tmp_path, text):
    """The CFD course's rule, written after --until, stops a problem file at the step sf.run(until=) stops it."""
    from stencilforge.convergence import load_problem_file

    path = tmp_path / "laplace.py"
    path.write_text(LAPLACE_FILE)
    res = CliRunner().invoke(app, ["run", str(path), "--backend", "numpy", "--check-every", "1", "--until", text, "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)
    problem = load_problem_file(path).build()
    p = problem.fields["p"]
    rule = eval(text, {"sf": sf, "abs": abs, "norm": sf.norm, "p": p})
    want = sf.run(problem, backend="numpy", check_every=1, until=rule).summary
    assert s["stop"] == "until" and s["step"] == want["step"] < 10000 and s["until"] == want["until"]


@pytest.mark.parametrize("text, message", [
    ("norm(p.next - p, 1 <", "is not an expression"),
    ("norm(q, 1) < 1", "NameError: name 'q' is not defined (it may use the fields p, norm, total and abs)"),
    ("__import__('os')", "NameError"),
    ("norm(p, 1)", "until takes a comparison of norms"),
])
def test_a_bad_until_is_one_line_and_exit_2(tmp_path, text, message):
    path = tmp_path / "laplace.py"
    path.write_text(LAPLACE_FILE)
    res = CliRunner().invoke(app, ["run", str(path), "--backend", "numpy", "--until", text])
    assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output, res.output
    assert len([line for line in res.output.splitlines() if line.strip()]) == 1, res.output

def _refusal(case):
    p = laplace().fields["p"]
    q = sf.Field("q", p.grid)
    cases = {
        "no comparison": lambda: sf.norm(p, 1),
        "a number": lambda: True,
        "a field outside a norm": lambda: p < 1,
        "no norm": lambda: sf.Constant("a", 1.0) < 2,
        "a field not in the problem": lambda: sf.norm(q, 1) < 1,
        "a neighbour": lambda: sf.norm(p[0, 1] - p, 1) < 1,
        "a norm of a norm": lambda: sf.norm(sf.norm(p) * p) < 1,
        "two comparisons": lambda: (sf.norm(p) < 1) < 2,
    }
    return cases[case]


@pytest.mark.parametrize("case,message", [
    ("no comparison", "until takes a comparison of norms"),
    ("a number", "until takes a comparison of norms"),
    ("a field outside a norm", "until reads p outside a norm"),
    ("no norm", "until compares no norm"),
    ("a field not in the problem", "until reads field q, which is not in the problem (its fields: p)"),
    ("a neighbour", "until reads p at a neighbouring cell (0, 1)"),
    ("a norm of a norm", "a norm inside a norm"),
    ("two comparisons", "until takes one comparison of norms"),
])
def test_bad_rules_are_refused_in_one_line(case, message):
    rule = _refusal(case)()
    for attempt in (lambda: sf.run(laplace(), steps=1, backend="numpy", until=rule), lambda: laplace(until=lambda p: rule)):
        with pytest.raises(sf.StencilforgeError, match=message.replace("(", r"\(").replace(")", r"\)")) as exc:
            attempt()
        assert "\n" not in str(exc.value)


def test_norms_outside_a_rule_and_bad_orders_are_refused_in_one_line():
    p = laplace().fields["p"]
    with pytest.raises(sf.StencilforgeError, match="ord is 1, 2 or math.inf, got 3"):
        sf.norm(p, 3)
    with pytest.raises(sf.StencilforgeError, match="they belong in a stop rule"):
        sf.Problem([sf.Eq(p.next, p + sf.norm(p))], boundary={p: sf.Periodic()})
    with pytest.raises(sf.StencilforgeError, match="returned ndarray"):
        sf.run(laplace(), steps=2, backend="numpy", check_every=1, until=lambda f: f["p"] > 0)
