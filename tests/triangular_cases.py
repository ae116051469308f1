"""Cases of solve_triangular, shared by the CPU and GPU workers; each returns a record with "ok".

Every matrix holds garbage where the solve must not look (NaN and Inf in the other triangle, and
on the diagonal with unit_diagonal), so a read of it shows. A solution is checked by its scaled
residual ‖op(A) X − B‖ / (n ‖A‖ ‖X‖) <= 10 eps and against SciPy's within 50 n eps, its
sharding against b's, and its status (the same on every rank).
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
from jax.sharding import PartitionSpec as P
from linalg_cases import A_SPEC, B_SPEC, DTYPES, gather, local_scalars, place

# (lower, trans, unit_diagonal): every variant of the solve.
VARIANTS = list(itertools.product((False, True), (0, 1, 2), (False, True)))


def triangular(n, dtype, seed, lower, unit, garbage="nan"):
    """(the matrix handed, the triangular matrix it means): a well-conditioned triangle
    (diagonal 2 + |g|, off-diagonal entries g / n) and where the solve must not read (the
    other triangle; the diagonal with unit) garbage: "nan" (NaN and Inf), "noise" (finite
    values), or None (zeros off the triangle, its diagonal 2 + |g|)."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((n, n))
    if np.issubdtype(dtype, np.complexfloating):
        g = g + 1j * rng.standard_normal((n, n))
    keep = np.tril(np.ones((n, n), bool), -1) if lower else np.triu(np.ones((n, n), bool), 1)
    eye = np.eye(n, dtype=bool)
    meant = np.where(keep, g / n, 0) + np.where(eye, 1.0 if unit else 2 + np.abs(g), 0)
    given = np.where(keep, g / n, 0) + np.where(eye, 2 + np.abs(g), 0)
    rest = ~keep & ~eye
    if garbage == "nan":
        given = np.where(rest, np.where(rng.random((n, n)) < 0.5, np.nan, np.inf), given)
        if unit:
            given = np.where(eye, np.nan, given)
    elif garbage == "noise":
        given = np.where(rest, rng.standard_normal((n, n)), given)
    return given.astype(dtype), meant.astype(dtype)


def _op(m, trans):
    return m if trans == 0 else (m.T if trans == 1 else m.conj().T)


def _rhs(n, k, dtype, seed):
    rng = np.random.default_rng(seed + 1)
    shape = (n,) if k == 0 else (n, k)
    b = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        b = b + 1j * rng.standard_normal(shape)
    return b.astype(dtype)


def _check(mesh, meant, b, b_spec, x, status, trans, lower, unit):
    """The record of one solve: residual, SciPy's solution, sharding, status on every rank."""
    n, dtype = meant.shape[0], meant.dtype
    eps = float(np.finfo(dtype).eps)
    xs = gather(x).astype(np.complex128)
    a64, b64 = _op(meant.astype(np.complex128), trans), b.astype(np.complex128)
    resid = np.linalg.norm(a64 @ xs - b64) / (
        n * np.linalg.norm(a64, 2) * max(np.linalg.norm(xs), np.finfo(float).tiny)
    )
    ref = scipy.linalg.solve_triangular(
        meant.astype(np.complex128), b64, trans=trans, lower=lower, unit_diagonal=unit
    )
    err = float(np.abs(xs - ref).max() / np.abs(ref).max())
    statuses = [int(np.real(s)) for s in local_scalars(status)[:, 0]]
    want = jax.sharding.NamedSharding(mesh, b_spec)
    return dict(
        residual=float(resid),
        scipy_error=err,
        same_sharding=bool(x.sharding.is_equivalent_to(want, x.ndim)),
        shape_ok=x.shape == b.shape and x.dtype == b.dtype,
        statuses=statuses,
        ok=bool(
            resid <= 10 * eps
            and err <= 50 * n * eps
            and x.sharding.is_equivalent_to(want, x.ndim)
            and x.shape == b.shape
            and x.dtype == b.dtype
            and statuses == [0] * len(statuses)
        ),
    )


def _solve(mesh, dtype, n, tile, k, b_spec, lower, trans, unit, seed, fn=None):
    """One solve on the garbage-filled matrix: its record."""
    import jaxmg

    given, meant = triangular(n, dtype, seed, lower, unit)
    b = _rhs(n, k, dtype, seed)
    kw = dict(trans=trans, lower=lower, unit_diagonal=unit, T_A=tile, return_status=True)
    call = fn or (lambda m, v: jaxmg.solve_triangular(m, v, **kw))
    x, status = call(place(given, mesh, A_SPEC), place(b, mesh, b_spec))
    return _check(mesh, meant, b, b_spec, x, status, trans, lower, unit)


def _combine(records):
    """Several solves as one record: every solve's, and ok when all are."""
    return dict(solves=records, ok=all(r["ok"] for r in records))


def triangular_case(mesh, dtype_name, n, tile, k, variant=0):
    """Two solves (b split by rows, b sharded like a) of one variant of the dtype x tile grid
    (`variant` indexes VARIANTS)."""
    dtype = DTYPES[dtype_name]
    lower, trans, unit = VARIANTS[variant % len(VARIANTS)]
    return _combine(
        [
            _solve(mesh, dtype, n, tile, k, spec, lower, trans, unit, n + variant)
            for spec in (B_SPEC, A_SPEC)
        ]
    )


def variants_case(mesh, dtype_name, n, tile, k):
    """Every variant (lower/upper x N/T/C x unit diagonal or not), b split by rows and sharded
    like a in turn; and a vector b."""
    dtype = DTYPES[dtype_name]
    records = [
        _solve(mesh, dtype, n, tile, k, (B_SPEC, A_SPEC)[i % 2], lower, trans, unit, i)
        for i, (lower, trans, unit) in enumerate(VARIANTS)
    ]
    records.append(_solve(mesh, dtype, n, tile, 0, P("pr"), True, 2, False, 99))
    return _combine(records)


def inside_jit_case(mesh, n, tile, k):
    """Traced in the caller's jit: b split by rows (its sharding unknown there), and sharded like
    a when in_specs says so."""
    import jaxmg

    records = []
    for b_spec, in_specs in ((B_SPEC, None), (A_SPEC, (A_SPEC, A_SPEC))):

        @jax.jit
        def fn(m, v, in_specs=in_specs):
            x, status = jaxmg.solve_triangular(
                m, 2.0 * v, 1, True, T_A=tile, in_specs=in_specs, return_status=True
            )
            return x / 2.0, status

        records.append(_solve(mesh, np.float64, n, tile, k, b_spec, True, 1, False, 7, fn))
    return _combine(records)


def vmap_case(mesh, n, tile, k):
    """jax.vmap over a batch of two matrices and right-hand sides (one call each), in a jit."""
    import jaxmg

    pairs = [triangular(n, np.complex128, seed, False, False) for seed in (3, 4)]
    given = np.stack([g for g, _ in pairs])
    b = np.stack([_rhs(n, k, np.complex128, seed) for seed in (3, 4)])
    fn = jax.jit(jax.vmap(lambda m, v: jaxmg.solve_triangular(m, v, trans="C", T_A=tile)))
    x = gather(fn(place(given, mesh, P(None, *A_SPEC)), place(b, mesh, P(None, *B_SPEC))))
    ref = np.stack(
        [scipy.linalg.solve_triangular(m, v, trans=2) for (_, m), v in zip(pairs, b, strict=True)]
    )
    err = float(np.abs(x - ref).max() / np.abs(ref).max())
    return dict(scipy_error=err, ok=err <= 50 * n * float(np.finfo(np.float64).eps))


def singular_case(mesh, n, tile, k):
    """A zero (or NaN) diagonal entry: x NaN and status 1 + its index on every rank, for both
    layouts of b; with unit_diagonal the same matrix solves (its diagonal is not read)."""
    import jaxmg

    given, meant = triangular(n, np.float64, 5, True, False, garbage=None)
    b = _rhs(n, k, np.float64, 5)
    records = []
    for value, b_spec in ((0.0, B_SPEC), (0.0, A_SPEC), (np.nan, B_SPEC)):
        bad = given.copy()
        bad[n // 2, n // 2] = value
        args = place(bad, mesh, A_SPEC), place(b, mesh, b_spec)
        x, status = jaxmg.solve_triangular(*args, lower=True, T_A=tile, return_status=True)
        statuses = [int(np.real(s)) for s in local_scalars(status)[:, 0]]
        records.append(
            dict(
                statuses=statuses,
                all_nan=bool(np.all(np.isnan(gather(x)))),
                ok=bool(statuses == [n // 2 + 1] * len(statuses) and np.all(np.isnan(gather(x)))),
            )
        )
    unit_bad = given.copy()
    unit_bad[n // 2, n // 2] = 0.0
    unit_meant = np.tril(given, -1) + np.eye(n)
    args = place(unit_bad, mesh, A_SPEC), place(b, mesh, B_SPEC)
    kw = dict(lower=True, unit_diagonal=True, T_A=tile, return_status=True)
    x, status = jaxmg.solve_triangular(*args, **kw)
    records.append(_check(mesh, unit_meant, b, B_SPEC, x, status, 0, True, True))
    return _combine(records)


def grad_case(mesh, n, tile, k):
    """Forward and reverse mode (jax.jvp, jax.grad) with respect to a and b, and for two of
    them a second derivative (the jvp of the gradient), against
    jax.scipy.linalg.solve_triangular's on the whole arrays: float64 and complex128, b split by
    rows and sharded like a, each trans, a unit diagonal."""
    cases = [
        (np.float64, B_SPEC, True, 0, False, True),
        (np.float64, A_SPEC, False, 1, True, False),
        (np.complex128, B_SPEC, False, 2, False, False),
        (np.complex128, A_SPEC, True, 2, False, True),
    ]
    return _combine([_grad(mesh, n, tile, k, 20 + i, *c) for i, c in enumerate(cases)])


def _grad(mesh, n, tile, k, seed, dtype, b_spec, lower, trans, unit, second_order):
    import jaxmg

    # Finite values off the triangle (and on a unit diagonal): they get no derivative.
    given, _ = triangular(n, dtype, seed, lower, unit, garbage="noise")
    b, w, db = (_rhs(n, k, dtype, seed + s) for s in (0, 20, 40))
    da = _rhs(n, n, dtype, seed + 30)
    kw = dict(trans=trans, lower=lower, unit_diagonal=unit)

    def loss(solve):
        return lambda m, v: jnp.real(jnp.sum(w * jnp.sin(solve(m, v, **kw))))

    ours = loss(lambda m, v, **kw: jaxmg.solve_triangular(m, v, T_A=tile, **kw))
    ref = loss(jax.scipy.linalg.solve_triangular)
    grad = jax.jit(jax.grad(ours, argnums=(0, 1)))
    ap, bp = place(given, mesh, A_SPEC), place(b, mesh, b_spec)
    dap, dbp = place(da, mesh, A_SPEC), place(db, mesh, b_spec)
    got = [gather(g) for g in grad(ap, bp)]
    got_t = jax.jit(lambda *x: jax.jvp(ours, x[:2], x[2:])[1])(ap, bp, dap, dbp)
    arrays = [jnp.asarray(x) for x in (given, b, da, db)]
    ref_grad = jax.grad(ref, argnums=(0, 1))
    want = [np.asarray(g) for g in ref_grad(*arrays[:2])]
    want_t = float(jax.jvp(ref, arrays[:2], arrays[2:])[1])

    def rel(x, y):
        return float(np.abs(np.asarray(x) - y).max() / max(np.abs(y).max(), 1e-300))

    errors = dict(
        grad_a=rel(got[0], want[0]),
        grad_b=rel(got[1], want[1]),
        jvp=rel(float(np.asarray(got_t.addressable_data(0))), want_t),
    )
    if second_order:  # the jvp of the gradient
        second = jax.jit(lambda *x: jax.jvp(grad, x[:2], x[2:])[1])
        got_h = [gather(g) for g in second(ap, bp, dap, dbp)]
        want_h = [np.asarray(g) for g in jax.jvp(ref_grad, arrays[:2], arrays[2:])[1]]
        errors.update(second_a=rel(got_h[0], want_h[0]), second_b=rel(got_h[1], want_h[1]))
    return dict(errors=errors, ok=all(e <= 1e-10 for e in errors.values()))


def triangular_plan(n, tiles=(None, 4, 7), k=4, grad=True):
    """[(name, kind, params)]: the dtype x tile grid (a variant each, both layouts of b), every
    variant in complex128 (the real types take the same steps, without conjugation), inside a
    jit, vmap, singular matrices, and with `grad` derivatives."""
    from solve_plan import DTYPE_NAMES

    plan = []
    for d, dtype_name in enumerate(DTYPE_NAMES):
        for t, tile in enumerate(tiles):
            params = dict(dtype_name=dtype_name, n=n, tile=tile, k=k, variant=3 * d + t)
            name = f"solve_triangular/{dtype_name}/n{n}/T{tile}/k{k}"
            plan.append((name, "triangular", params))
    params = dict(dtype_name="complex128", n=n, tile=tiles[-1], k=k)
    plan.append(("solve_triangular/variants/complex128", "triangular-variants", params))
    for kind in ("inside-jit", "vmap", "singular") + (("grad",) if grad else ()):
        params = dict(kind=kind, n=n, tile=tiles[-1], k=k)
        plan.append((f"solve_triangular/{kind}", "triangular-other", params))
    return plan


OTHER = {
    "inside-jit": inside_jit_case,
    "vmap": vmap_case,
    "singular": singular_case,
    "grad": grad_case,
}


def triangular_kinds(mesh):
    """The worker's functions of the plan's kinds, on one mesh."""
    return {
        "triangular": lambda **p: triangular_case(mesh, **p),
        "triangular-variants": lambda **p: variants_case(mesh, **p),
        "triangular-other": lambda kind, **p: OTHER[kind](mesh, **p),
    }
