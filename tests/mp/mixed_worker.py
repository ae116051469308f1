"""Mixed precision solves (factor_dtype=) on one mesh: potrs and lu_solve against NumPy's
float64 solve over condition numbers 1e1 to 1e12, the path and refinement steps taken, the
backward error, the output sharding, factor once and solve many, gradients against the
float64 solve's, and the errors of bad arguments.

Usage: mpirun -n P python mixed_worker.py ROWS COLS OUT.json
(JAXMG_CASES, a regular expression, keeps the matching cases only.)
"""

import json
import os
import re
import sys
import traceback
from pathlib import Path

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402
from jaxmg.routines.mixed import tolerance  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from linalg_cases import A_SPEC, B_SPEC, gather, local_scalars, place  # noqa: E402

rows, cols, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
mesh = jax.make_mesh((rows, cols), ("pr", "pc"))
jax.set_mesh(mesh)  # eager operations on explicitly sharded arrays need it (jax.jvp)
N = 24
EPS = float(np.finfo(np.float64).eps)


def conditioned(n, kappa, dtype, seed, spd):
    """A matrix of 2-norm condition number kappa: Q diag(s) Qᴴ (SPD) or U diag(s) Vᴴ, the
    singular values log-spaced from 1 to 1/kappa."""
    rng = np.random.default_rng(seed)

    def unitary():
        x = rng.standard_normal((n, n))
        if np.issubdtype(dtype, np.complexfloating):
            x = x + 1j * rng.standard_normal((n, n))
        return np.linalg.qr(x)[0]

    s = np.logspace(0, -np.log10(kappa), n)
    u = unitary()
    v = u if spd else unitary()
    a = (u * s) @ v.conj().T
    if spd:
        a = (a + a.conj().T) / 2
    return a.astype(dtype)


def rhs(n, k, dtype, seed):
    rng = np.random.default_rng(seed + 100)
    shape = (n,) if k == 0 else (n, k)
    b = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        b = b + 1j * rng.standard_normal(shape)
    return b.astype(dtype)


def compare(a, b, x, kappa=None):
    """The forward error against NumPy's float64 solve, relative to its condition bound, and
    the normwise backward error of x (per column, the worst). kappa: A's 2-norm condition
    number where it is known (a's own construction), else computed."""
    n = a.shape[0]
    ref = np.linalg.solve(a, b)
    kappa = float(np.linalg.cond(a)) if kappa is None else kappa
    forward = float(np.linalg.norm(x - ref) / np.linalg.norm(ref))
    x2, b2 = x.reshape(n, -1), b.reshape(n, -1)
    r = b2 - a @ x2
    a_norm = np.max(np.sum(np.abs(a), axis=1))
    berr = np.max(np.abs(r), axis=0) / (
        a_norm * np.max(np.abs(x2), axis=0) + np.max(np.abs(b2), axis=0)
    )
    return dict(
        kappa=kappa,
        forward=forward,
        # NumPy's own float64 solve is as far from the exact solution: both within κ N ε.
        forward_tol=float(kappa * n * EPS * 4),
        backward=float(np.max(berr)),
        # The refinement's own criterion (max(N / 64, 4) ε), with room for the rounding of
        # NumPy's residual.
        backward_tol=2 * tolerance(n),
    )


def spec_of(x):
    spec = tuple(x.sharding.spec)
    return [None if s is None else str(s) for s in spec] + [None] * (x.ndim - len(spec))


def solve_case(routine, dtype_name, kappa, tile, k, cholesky="auto", math="auto", n=N):
    """cholesky="blocked": the low-precision factor by jaxmg's 1-D Cholesky (1 x P grids);
    math="tf32": its products in TF32 on GPUs (config.gpu_math); n: the order (default N)."""
    dtype = np.dtype(dtype_name).type
    a = conditioned(n, kappa, dtype, 3, routine == "potrs")
    b = rhs(n, k, dtype, 1)
    b_spec = B_SPEC if k else P("pr")
    a_g, b_g = place(a, mesh, A_SPEC), place(b, mesh, b_spec)
    low = "float32" if dtype_name == "float64" else jnp.complex64
    fn = getattr(jaxmg, routine)
    with jaxmg.config.override(cpu_cholesky=cholesky, gpu_cholesky=cholesky, gpu_math=math):
        x, status, info = fn(
            a_g, b_g, T_A=tile, factor_dtype=low, return_status=True, return_info=True
        )
    rec = compare(a, b, gather(x), kappa=None if n == N else kappa)
    rec.update(
        path=info.path_name(),
        iterations=int(np.asarray(info.iterations)),
        info_backward=float(np.max(np.asarray(info.backward_error))),
        condition_estimate=float(np.asarray(info.condition_estimate)),
        kappa1=float(np.linalg.cond(a.astype(np.complex128), 1)) if n == N else None,
        factor_eps=float(np.finfo(np.float32).eps),
        status=int(np.asarray(status)),
        x_spec=spec_of(x),
        b_spec=spec_of(b_g),
        x_dtype=str(x.dtype),
    )
    rec["ok"] = bool(
        rec["forward"] <= rec["forward_tol"]
        and rec["backward"] <= rec["backward_tol"]
        and rec["status"] == 0
        and rec["x_spec"] == rec["b_spec"]
        and rec["x_dtype"] == dtype_name
    )
    return rec


def inside_jit_case(routine):
    """The whole mixed solve inside the caller's jit, and jaxmg.linalg.solve."""
    a = conditioned(N, 1e4, np.float64, 4, routine == "potrs")
    b = rhs(N, 2, np.float64, 2)
    a_g, b_g = place(a, mesh, A_SPEC), place(b, mesh, B_SPEC)
    fn = getattr(jaxmg, routine)
    x = jax.jit(lambda a, b: fn(a, b, T_A=5, factor_dtype=jnp.float32))(a_g, b_g)
    assume = "pos" if routine == "potrs" else "gen"
    y = jaxmg.linalg.solve(a_g, b_g, assume_a=assume, T_A=5, factor_dtype="float32")
    rec = compare(a, b, gather(x))
    other = compare(a, b, gather(y))
    rec["linalg_backward"] = other["backward"]
    rec["ok"] = bool(
        rec["backward"] <= rec["backward_tol"] and other["backward"] <= rec["backward_tol"]
    )
    return rec


def factor_case(routine, dtype_name):
    """Factor once in low precision, solve three right-hand sides (inside and outside jit): no
    refactorization (the factor is float32; each solve refines against the float64 A)."""
    dtype = np.dtype(dtype_name).type
    low = np.float32 if dtype_name == "float64" else np.complex64
    a = conditioned(N, 1e5, dtype, 5, routine == "potrs")
    a_g = place(a, mesh, A_SPEC)
    if routine == "potrs":
        f = jaxmg.cho_factor(a_g, T_A=5, factor_dtype=low)

        def solve(f, b):
            return jaxmg.cho_solve(f, b, return_info=True)
    else:
        f = jaxmg.lu_factor(a_g, T_A=5, factor_dtype=low)

        def solve(f, b):
            return jaxmg.lu_solve(f, b, return_info=True)

    worst, paths = 0.0, []
    for seed, k in ((1, 0), (2, 3)):
        b = rhs(N, k, dtype, seed)
        b_g = place(b, mesh, B_SPEC if k else P("pr"))
        x, info = solve(f, b_g)
        worst = max(worst, compare(a, b, gather(x))["backward"])
        paths.append(info.path_name())
    b = rhs(N, 2, dtype, 3)
    x, info = jax.jit(solve)(f, place(b, mesh, B_SPEC))
    worst = max(worst, compare(a, b, gather(x))["backward"])
    paths.append(info.path_name())
    ok = worst <= 2 * tolerance(N) and str(f.matrix.dtype) == np.dtype(low).name
    return dict(backward=worst, paths=paths, factor_dtype=str(f.matrix.dtype), ok=bool(ok))


def grad_case(routine, dtype_name):
    """jax.grad of Re Σ w ⊙ x with respect to A and b: mixed against float64."""
    dtype = np.dtype(dtype_name).type
    low = np.float32 if dtype_name == "float64" else np.complex64
    spd = routine == "potrs"
    a = conditioned(N, 1e3, dtype, 6, spd)
    b = rhs(N, 2, dtype, 4)
    w = rhs(N, 2, dtype, 7)
    a_g, b_g, w_g = place(a, mesh, A_SPEC), place(b, mesh, B_SPEC), place(w, mesh, B_SPEC)
    fn = getattr(jaxmg, routine)

    def loss(a, b, w, factor_dtype):
        x = fn(a, b, T_A=5, factor_dtype=factor_dtype)
        return jnp.real(jnp.sum(w * x))

    grad = jax.jit(jax.grad(loss, argnums=(0, 1)), static_argnums=3)
    ga, gb = grad(a_g, b_g, w_g, low)
    ra, rb = grad(a_g, b_g, w_g, None)
    ga, gb, ra, rb = (gather(v) for v in (ga, gb, ra, rb))
    err_a = float(np.linalg.norm(ga - ra) / np.linalg.norm(ra))
    err_b = float(np.linalg.norm(gb - rb) / np.linalg.norm(rb))
    tol = 1e3 * N * EPS  # κ N ε: both derivatives within it of the exact one
    # forward mode too: jax.jvp in the direction of A itself
    _, tangent = jax.jvp(lambda a: loss(a, b_g, w_g, low), (a_g,), (a_g,))
    _, ref_tangent = jax.jvp(lambda a: loss(a, b_g, w_g, None), (a_g,), (a_g,))
    err_t = abs(float(tangent) - float(ref_tangent)) / abs(float(ref_tangent))
    return dict(
        err_a=err_a,
        err_b=err_b,
        err_jvp=err_t,
        tol=tol,
        ok=bool(max(err_a, err_b, err_t) <= tol),
    )


def failure_case(routine, kind):
    """A real failure keeps its status: NaN on every process and the status of the float64
    factorization (not positive definite, singular), or -1 (not symmetric) without fallback."""
    a = conditioned(N, 10, np.float64, 8, routine == "potrs")
    if kind == "not-spd":
        a = a - 0.5 * np.eye(N)  # eigenvalues from 1 down to -0.4
    elif kind == "not-symmetric":
        a[0, N - 1] += 1.0
    elif kind == "singular":
        a[:, 3] = 0.0
    b = rhs(N, 2, np.float64, 1)
    fn = getattr(jaxmg, routine)
    x, status, info = fn(
        place(a, mesh, A_SPEC),
        place(b, mesh, B_SPEC),
        T_A=5,
        factor_dtype="float32",
        return_status=True,
        return_info=True,
    )
    statuses = [int(v) for v in local_scalars(status).ravel().real]
    path = info.path_name()
    all_nan = bool(np.all(np.isnan(gather(x))))
    want = "mixed" if kind == "not-symmetric" else "fallback"
    ok = all_nan and len(set(statuses)) == 1 and path == want
    ok = ok and (statuses[0] == -1 if kind == "not-symmetric" else statuses[0] > 0)
    return dict(statuses=statuses, path=path, all_nan=all_nan, ok=bool(ok))


def errors_case():
    """Bad factor_dtype (and flags it refuses): ValueError before any engine call."""
    a64 = place(conditioned(N, 10, np.float64, 1, True), mesh, A_SPEC)
    b64 = place(rhs(N, 0, np.float64, 1), mesh, P("pr"))
    a32, b32 = a64.astype(jnp.float32), b64.astype(jnp.float32)
    ac = a64.astype(jnp.complex128)
    bad = {
        "float32-input": lambda: jaxmg.potrs(a32, b32, factor_dtype=jnp.float32),
        "bfloat16": lambda: jaxmg.potrs(a64, b64, factor_dtype=jnp.bfloat16),
        "float16": lambda: jaxmg.lu_solve(a64, b64, factor_dtype="float16"),
        "wider": lambda: jaxmg.lu_solve(a64, b64, factor_dtype=jnp.complex128),
        "complex64-for-float64": lambda: jaxmg.potrs(a64, b64, factor_dtype=jnp.complex64),
        "float32-for-complex128": lambda: jaxmg.lu_factor(ac, factor_dtype=jnp.float32),
        "logdet": lambda: jaxmg.potrs(a64, b64, factor_dtype="float32", return_logdet=True),
        "donate": lambda: jaxmg.lu_solve(a64, b64, factor_dtype="float32", donate=True),
        "info-without": lambda: jaxmg.potrs(a64, b64, return_info=True),
        "triangular": lambda: jaxmg.linalg.solve(
            a64, b64, assume_a="lower triangular", factor_dtype="float32"
        ),
    }
    messages = {}
    for name, call in bad.items():
        try:
            call()
            messages[name] = None
        except ValueError as e:
            messages[name] = str(e)
    ok = all(m is not None for m in messages.values())
    ok = ok and "factor_dtype=jnp.float32" in messages["bfloat16"]
    ok = ok and "float64 or complex128" in messages["float32-input"]
    # After the refusals, every process still takes the same calls: a solve works.
    x = jaxmg.potrs(a64, b64, factor_dtype="float32")
    ok = ok and bool(np.all(np.isfinite(gather(x))))
    return dict(messages=messages, ok=bool(ok))


CASES = {}
for routine in ("potrs", "lu_solve"):
    for kappa in (1e1, 1e4, 1e8, 1e12):
        CASES[f"{routine}/float64/kappa{kappa:.0e}/T5/K2"] = (
            solve_case,
            (routine, "float64", kappa, 5, 2),
        )
    CASES[f"{routine}/float64/kappa1e+02/T4/vector"] = (solve_case, (routine, "float64", 1e2, 4, 0))
    CASES[f"{routine}/complex128/kappa1e+03/T5/K2"] = (
        solve_case,
        (routine, "complex128", 1e3, 5, 2),
    )
    CASES[f"{routine}/complex128/kappa1e+12/Tauto/vector"] = (
        solve_case,
        (routine, "complex128", 1e12, None, 0),
    )
    CASES[f"{routine}/inside-jit"] = (inside_jit_case, (routine,))
    CASES[f"{routine}/factor/float64"] = (factor_case, (routine, "float64"))
    CASES[f"{routine}/factor/complex128"] = (factor_case, (routine, "complex128"))
    CASES[f"{routine}/grad/float64"] = (grad_case, (routine, "float64"))
    CASES[f"{routine}/grad/complex128"] = (grad_case, (routine, "complex128"))
for kappa in (1e4, 1e8):
    CASES[f"potrs/float64/kappa{kappa:.0e}/T5/K2/blocked"] = (
        solve_case,
        ("potrs", "float64", kappa, 5, 2, "blocked"),
    )
# TF32 products in the 1-D Cholesky (GPUs; elsewhere gpu_math is not read): refinement from a
# TF32 factor, and the fallback where TF32 cannot resolve A. Tiles of 5 on 1 x P grids; on one
# GPU the blocks are at least 2048 wide, so its case is N = 4608 (two full blocks and one of 512,
# the panel solves by the inverse, the look-ahead).
for dtype_name, kappa in (("float64", 1e2), ("complex128", 1e2), ("float64", 1e8)):
    CASES[f"potrs/{dtype_name}/kappa{kappa:.0e}/T5/K2/blocked-tf32"] = (
        solve_case,
        ("potrs", dtype_name, kappa, 5, 2, "blocked", "tf32"),
    )
if jax.devices()[0].platform == "gpu":
    CASES["potrs/float64/kappa1e+02/N4608/K2/blocked-tf32"] = (
        solve_case,
        ("potrs", "float64", 1e2, None, 2, "blocked", "tf32", 4608),
    )
CASES["potrs/failure/not-spd"] = (failure_case, ("potrs", "not-spd"))
CASES["potrs/failure/not-symmetric"] = (failure_case, ("potrs", "not-symmetric"))
CASES["lu_solve/failure/singular"] = (failure_case, ("lu_solve", "singular"))
CASES["errors"] = (errors_case, ())

only = re.compile(os.environ.get("JAXMG_CASES", ""))
names = [name for name in CASES if only.search(name)]
records = []
for name in names:
    fn, args = CASES[name]
    try:
        rec = fn(*args)
    except Exception as e:  # noqa: BLE001 - recorded, asserted by the test
        rec = dict(
            ok=False, error=f"{type(e).__name__}: {e}"[:2000], trace=traceback.format_exc()[-3000:]
        )
    records.append(dict(case=name, **rec))
if jax.process_index() == 0:
    Path(out_path).write_text(
        json.dumps(dict(mesh=[rows, cols], planned=names, records=records), indent=1)
    )
