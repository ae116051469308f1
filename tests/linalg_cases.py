"""Inputs and measurements shared by the multi-process test workers (CPU and GPU).

Every process builds the same matrices from fixed seeds; results are gathered to every process
and compared with NumPy in float64/complex128, with tolerances scaled by n * eps of the dtype.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from solve_plan import solve_name

DTYPES = {
    "float32": np.float32,
    "float64": np.float64,
    "complex64": np.complex64,
    "complex128": np.complex128,
}


def spd(n, dtype, seed):
    """A well-conditioned symmetric (Hermitian) positive-definite matrix: X Xᴴ / n + I."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, n))
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal((n, n))
    return (x @ x.conj().T / n + np.eye(n)).astype(dtype)


def general(n, dtype, seed):
    """A general (non-symmetric) nonsingular matrix: Gaussian entries plus sqrt(n) I."""
    rng = np.random.default_rng(seed + 7)
    x = rng.standard_normal((n, n))
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal((n, n))
    return (x + np.sqrt(n) * np.eye(n)).astype(dtype)


def rhs(n, k, dtype, seed):
    """b of shape (n,) when k == 0, else (n, k)."""
    rng = np.random.default_rng(seed + 1)
    shape = (n,) if k == 0 else (n, k)
    b = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        b = b + 1j * rng.standard_normal(shape)
    return b.astype(dtype)


def place(x, mesh, spec):
    """x (the same NumPy array on every process) as a global array sharded by spec."""
    return jax.make_array_from_callback(x.shape, NamedSharding(mesh, spec), lambda idx: x[idx])


def gather(x):
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def local_scalars(*xs):
    """Each process's own copy of replicated scalars, gathered: [process][value]."""
    mine = np.array([complex(np.asarray(x.addressable_data(0))) for x in xs])
    return multihost_utils.process_allgather(mine)


def measure(case, a, b, x, logdet=None, status=None):
    """Scaled residual ‖AX−B‖/(n‖A‖‖X‖) <= 10 eps, |logdet error| <= 20 n eps max(1, |ref|/n)."""
    n = a.shape[0]
    eps = float(np.finfo(a.dtype).eps)
    xa = np.asarray(x, dtype=np.complex128)
    a64, b64 = a.astype(np.complex128), b.astype(np.complex128)
    resid = np.linalg.norm(a64 @ xa - b64) / (
        n * np.linalg.norm(a64, 2) * max(np.linalg.norm(xa), np.finfo(float).tiny)
    )
    rec = dict(case=case, n=n, eps=eps, residual=float(resid), residual_tol=10 * eps)
    rec["ok"] = bool(resid <= rec["residual_tol"])
    if logdet is not None:
        ref = float(np.linalg.slogdet(a64)[1])
        rec.update(
            logdet_err=abs(float(np.real(logdet)) - ref),
            logdet_tol=20 * n * eps * max(1, abs(ref) / n),
        )
        rec["ok"] = rec["ok"] and bool(rec["logdet_err"] <= rec["logdet_tol"])
    if status is not None:
        rec["status"] = int(np.real(status))
        rec["ok"] = rec["ok"] and rec["status"] == 0
    return rec


A_SPEC, B_SPEC = P("pr", "pc"), P("pr", None)


# ------------------------------------------------------------------------------------------------
# Solve routines: potrs and lu_solve through one set of cases, each under a unique name.

MATRICES = {"potrs": spd, "lu_solve": general}


def routine_fn(routine):
    import jaxmg

    return getattr(jaxmg, routine)


class engine_path:  # noqa: N801 - a context manager used like a function
    """Forces one engine path for a routine on this platform, restored on exit.

    "default": the routine's own choice; "inplace": the shards as they lie (the engine holds aᵀ
    and, for lu_solve, solves with the transposed factors); "transposed": the engine is handed aᵀ
    (aᴴ) on every mesh shape; "redistribute": the engine redistributes (Gemr2D) on any mesh;
    "cusolvermp": lu_solve factors with cuSOLVERMp's Getrf on GPUs (not jaxmg's 1-D LU);
    "scalapack": on CPUs, ScaLAPACK's p?getrf (not the 1-D LU) and potri by p?potrs with the
    identity (not the blocked inverse); "blocked": potrs's Cholesky by jaxmg's 1-D Cholesky
    where the engine grid is 1 x P (else the library's).
    """

    def __init__(self, routine, path, platform):
        import jaxmg.routines.lu_solve as lu
        import jaxmg.routines.potrs as po

        module = po if routine == "potrs" else lu
        self.platforms = (
            po.TRANSPOSE_TALL_MESHES if routine == "potrs" else lu.TRANSPOSE_WIDE_MESHES
        )
        self.always = module.TRANSPOSE_PLATFORMS
        self.path, self.platform = path, platform

    def __enter__(self):
        from jaxmg._core.testing import hooks

        self.saved = set(self.platforms)
        self.saved_always = set(self.always)
        values = {}
        if self.path == "inplace":
            self.platforms.discard(self.platform)
        elif self.path == "transposed":
            self.always.add(self.platform)
        elif self.path == "redistribute":
            values = {"redistribute": True}
        elif self.path == "cusolvermp":
            values = {"gpu_lu": "cusolvermp"}
        elif self.path == "scalapack":
            values = {"cpu_lu": "scalapack", "cpu_inverses": "scalapack"}
        elif self.path == "blocked":
            values = {"cpu_cholesky": "blocked", "gpu_cholesky": "blocked"}
        self.hooks = hooks(**values)
        self.hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self.hooks.__exit__(*exc)
        self.platforms.clear()
        self.platforms.update(self.saved)
        self.always.clear()
        self.always.update(self.saved_always)


def solve_case(mesh, routine, dtype_name, n, tile, k, path="default", pad=True):
    """One solve with logdet and status: residual, log|det| and agreement of every rank."""
    dtype = DTYPES[dtype_name]
    a, b = MATRICES[routine](n, dtype, n), rhs(n, k, dtype, n)
    platform = mesh.devices.flat[0].platform
    platform = "cuda" if platform == "gpu" else platform
    with engine_path(routine, path, platform):
        x, logdet, status = routine_fn(routine)(
            place(a, mesh, A_SPEC),
            place(b, mesh, B_SPEC if k else P("pr")),
            T_A=tile,
            return_logdet=True,
            return_status=True,
            pad=pad,
        )
    assert x.shape == b.shape and x.dtype == b.dtype, (x.shape, x.dtype)
    assert logdet.dtype == np.finfo(dtype).dtype, logdet.dtype
    per_rank = local_scalars(logdet, status)
    rec = measure(
        solve_name(routine, dtype_name, n, tile, k, path, pad),
        a,
        b,
        gather(x),
        per_rank[0][0],
        per_rank[0][1],
    )
    rec["ranks_agree"] = bool(np.all(per_rank == per_rank[0]))
    rec["ok"] = rec["ok"] and rec["ranks_agree"]
    return rec


def not_symmetric_case(mesh, n, tile=4):
    """potrs on a matrix holding one triangle: NaN and status -1 on every rank by default; the
    check can be turned off (then the engine reads whatever the tiles hold)."""
    import jaxmg

    a = np.tril(spd(n, np.float64, 12))
    b = rhs(n, 2, np.float64, 12)
    x, logdet, status = jaxmg.potrs(
        place(a, mesh, A_SPEC),
        place(b, mesh, B_SPEC),
        T_A=tile,
        return_logdet=True,
        return_status=True,
    )
    per_rank = local_scalars(logdet, status)
    # The same with donation; and a complex symmetric matrix that is not Hermitian (A = Aᵀ).
    _, status3 = jaxmg.potrs(
        place(a, mesh, A_SPEC), place(b, mesh, B_SPEC), T_A=tile, return_status=True, donate=True
    )
    c = spd(n, np.float64, 12) + 0.5j * spd(n, np.float64, 13)  # c = cᵀ, not cᴴ
    _, status4 = jaxmg.potrs(
        place(c, mesh, A_SPEC),
        place(b.astype(np.complex128), mesh, B_SPEC),
        T_A=tile,
        return_status=True,
    )
    good = spd(n, np.float64, 12)
    x2, status2 = jaxmg.potrs(
        place(good, mesh, A_SPEC),
        place(b, mesh, B_SPEC),
        T_A=tile,
        return_status=True,
        check_symmetry=False,
    )
    rec = measure("", good, b, gather(x2), status=local_scalars(status2)[0][0])
    rec.update(
        x_all_nan=bool(np.all(np.isnan(gather(x)))),
        logdet_nan_all_ranks=bool(np.all(np.isnan(np.real(per_rank[:, 0])))),
        status_all_ranks=[int(np.real(s)) for s in per_rank[:, 1]],
    )
    rec["ok"] = (
        rec["ok"]
        and rec["x_all_nan"]
        and rec["logdet_nan_all_ranks"]
        and rec["status_all_ranks"] == [-1] * len(per_rank)
        and int(np.asarray(status3.addressable_data(0))) == -1
        and int(np.asarray(status4.addressable_data(0))) == -1
    )
    return rec


def singular_case(mesh, routine, n, tile, path="default", nan=False):
    """A matrix the routine must refuse (not positive definite / exactly singular, or with a NaN
    entry when `nan`): NaN solution and logdet and the same positive status on every rank; the
    next call works."""
    if routine == "potrs":
        a = spd(n, np.float64, 6)
        a[n // 2, n // 2] = -10.0 * n
    else:
        a = general(n, np.float64, 6)
        a[:, n // 2] = 0.0
    if nan:
        a = MATRICES[routine](n, np.float64, 6)
        a[n // 3, n // 3] = np.nan
    b = rhs(n, 2, np.float64, 6)
    platform = mesh.devices.flat[0].platform
    with engine_path(routine, path, "cuda" if platform == "gpu" else platform):
        x, logdet, status = routine_fn(routine)(
            place(a, mesh, A_SPEC),
            place(b, mesh, B_SPEC),
            T_A=tile,
            return_logdet=True,
            return_status=True,
        )
        xs = gather(x)
        per_rank = local_scalars(logdet, status)
        recovers = solve_case(mesh, routine, "float64", n, tile, 2, path)["ok"]
    rec = dict(
        case=f"{routine}/{'nan-input' if nan else 'singular'}"
        + ("" if path == "default" else f"/{path}"),
        x_all_nan=bool(np.all(np.isnan(xs))),
        logdet_nan_all_ranks=bool(np.all(np.isnan(np.real(per_rank[:, 0])))),
        status_all_ranks=[int(np.real(s)) for s in per_rank[:, 1]],
        recovers=recovers,
    )
    rec["ok"] = (
        rec["x_all_nan"]
        and rec["logdet_nan_all_ranks"]
        and all(s > 0 for s in rec["status_all_ranks"])
        and len(set(rec["status_all_ranks"])) == 1
        and rec["recovers"]
    )
    return rec


def run_named(plan, records, on_record=None):
    """Runs an ordered {name: fn} plan; every record carries its plan name, also on error, and
    its wall time in seconds."""
    import time
    import traceback

    for name, fn in plan.items():
        t0 = time.perf_counter()
        try:
            rec = fn()
        except Exception as e:  # noqa: BLE001 - reported to the test
            rec = dict(
                error=f"{type(e).__name__}: {e}"[:3000], trace=traceback.format_exc()[-3000:]
            )
        rec["case"] = name
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        rec.setdefault("ok", "error" not in rec)
        records.append(rec)
        if on_record is not None:
            on_record(rec)
    names = [r["case"] for r in records]
    assert len(names) == len(set(names)), f"duplicate case names: {names}"
    return records


def inside_jit_case(mesh, routine, n, tile=6):
    """The routine traced inside the caller's jit (only the abstract mesh is known there)."""
    a, b = MATRICES[routine](n, np.float64, 4), rhs(n, 3, np.float64, 4)

    @jax.jit
    def f(a, b):
        x, logdet = routine_fn(routine)(a, 2.0 * b, T_A=tile, return_logdet=True)
        return x / 2.0, logdet + 0.0

    x, logdet = f(place(a, mesh, A_SPEC), place(b, mesh, B_SPEC))
    return measure("", a, b, gather(x), local_scalars(logdet)[0][0])


# ------------------------------------------------------------------------------------------------
# Inverses: potri, checked by ‖A X − I‖ and X = Xᴴ, with a's sharding kept.


def inverse_name(dtype_name, n, tile, path="default", pad=True, variant=""):
    name = f"potri/{dtype_name}/n{n}/T{tile}"
    if path != "default":
        name += f"/{path}"
    if not pad:
        name += "/nopad"
    return name + (f"/{variant}" if variant else "")


def inverse_case(mesh, dtype_name, n, tile, path="default", pad=True, variant=""):
    """potri: ‖A X − I‖ <= 20 n eps ‖A‖ ‖X‖, X Hermitian to rounding, a's sharding kept, logdet
    and status agreed by every rank. variant: "donate" or "jit" (inside a user's jit)."""
    import jaxmg

    dtype = DTYPES[dtype_name]
    a = spd(n, dtype, n + 3)
    ap = place(a, mesh, A_SPEC)
    sharding = ap.sharding
    kwargs = dict(T_A=tile, pad=pad, return_logdet=True, return_status=True)
    with engine_path("potrs", path, mesh.devices.flat[0].platform.replace("gpu", "cuda")):
        if variant == "jit":
            x, logdet, status = jax.jit(lambda m: jaxmg.potri(m, **kwargs))(ap)
        else:
            x, logdet, status = jaxmg.potri(ap, donate=variant == "donate", **kwargs)
    assert x.shape == a.shape and x.dtype == a.dtype, (x.shape, x.dtype)
    same_sharding = x.sharding.is_equivalent_to(sharding, 2)
    xg = gather(x).astype(np.complex128)
    a64 = a.astype(np.complex128)
    eps = float(np.finfo(dtype).eps)
    scale = np.linalg.norm(a64, 2) * np.linalg.norm(xg, 2)
    resid = float(np.abs(a64 @ xg - np.eye(n)).max() / scale)
    asym = float(np.abs(xg - xg.conj().T).max() / np.abs(xg).max())
    per_rank = local_scalars(logdet, status)
    ref = float(np.linalg.slogdet(a64)[1])
    rec = dict(
        case=inverse_name(dtype_name, n, tile, path, pad, variant),
        n=n,
        eps=eps,
        residual=resid,
        residual_tol=20 * n * eps,
        hermitian_error=asym,
        same_sharding=bool(same_sharding),
        logdet_error=float(abs(np.real(per_rank[0][0]) - ref)),
        status=int(np.real(per_rank[0][1])),
        ranks_agree=bool(np.all(per_rank == per_rank[0])),
    )
    rec["ok"] = (
        resid <= rec["residual_tol"]
        and asym <= 20 * n * eps
        and rec["same_sharding"]
        and rec["logdet_error"] <= 20 * n * eps * max(1.0, abs(ref) / n)
        and rec["status"] == 0
        and rec["ranks_agree"]
    )
    return rec


def inverse_failure_case(mesh, kind, n, tile):
    """potri on a matrix that is not positive definite ("not-pd") or not Hermitian
    ("not-symmetric"): NaN inverse and logdet, the same status (> 0, or -1) on every rank."""
    import jaxmg

    a = spd(n, np.float64, 9)
    if kind == "not-pd":
        a[n // 2, n // 2] = -10.0 * n
    else:
        a = np.tril(a)
    x, logdet, status = jaxmg.potri(
        place(a, mesh, A_SPEC), T_A=tile, return_logdet=True, return_status=True
    )
    per_rank = local_scalars(logdet, status)
    statuses = [int(np.real(s)) for s in per_rank[:, 1]]
    rec = dict(
        case=f"potri/{kind}",
        all_nan=bool(np.all(np.isnan(gather(x)))),
        logdet_nan_all_ranks=bool(np.all(np.isnan(np.real(per_rank[:, 0])))),
        status_all_ranks=statuses,
    )
    want = (lambda s: s > 0) if kind == "not-pd" else (lambda s: s == -1)
    rec["ok"] = (
        rec["all_nan"]
        and rec["logdet_nan_all_ranks"]
        and len(set(statuses)) == 1
        and want(statuses[0])
    )
    return rec


# ------------------------------------------------------------------------------------------------
# jaxmg.linalg as jax.numpy.linalg and jax.scipy.linalg users write it: each case returns
# {label: error}, errors relative to NumPy's reference (max |x - ref| / max(1, max |ref|)),
# compared with LINALG_TOL_C * n * eps of the dtype; a wrong output sharding, a missing
# exception or a wrong message is an infinite error under its own label.

LINALG_TOL_C = 50


def linalg_tol(n, dtype_name):
    return LINALG_TOL_C * n * float(np.finfo(DTYPES[dtype_name]).eps)


def rel_err(x, ref):
    x, ref = np.asarray(x, np.complex128), np.asarray(ref, np.complex128)
    if x.shape != ref.shape:
        return float("inf")
    if x.size == 0:
        return 0.0
    return float(np.abs(x - ref).max() / max(1.0, float(np.abs(ref).max())))


def sharded_as(x, mesh, spec):
    """0.0 where x lies on mesh as spec shards it, inf otherwise (an error to record)."""
    sharding = getattr(x, "sharding", None)
    if sharding is None:
        return float("inf")
    return 0.0 if sharding.is_equivalent_to(NamedSharding(mesh, spec), x.ndim) else float("inf")


def raises(fn, kind, *words):
    """0.0 where fn() raises `kind` whose message holds every word, inf otherwise."""
    try:
        fn()
    except kind as e:
        return 0.0 if all(w in str(e) for w in words) else float("inf")
    except Exception:  # noqa: BLE001 - any other exception is the failure recorded
        return float("inf")
    return float("inf")


def hermitian_noise(n, dtype, seed, size=1e-3):
    """spd(n) plus a non-Hermitian perturbation of `size`: Hermitian only up to it."""
    rng = np.random.default_rng(seed + 5)
    e = rng.standard_normal((n, n))
    if np.issubdtype(dtype, np.complexfloating):
        e = e + 1j * rng.standard_normal((n, n))
    return (
        spd(n, np.float64 if dtype in (np.float32, np.float64) else np.complex128, seed) + size * e
    ).astype(dtype)


def tall(m, n, dtype, seed):
    rng = np.random.default_rng(seed + 3)
    x = rng.standard_normal((m, n))
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal((m, n))
    return x.astype(dtype)
