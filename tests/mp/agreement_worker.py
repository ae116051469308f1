"""Ranks that disagree, retry or never come: every rank gets a clear error, nothing hangs.

Usage: mpirun -n 2 python agreement_worker.py SCENARIO OUT_PREFIX   (writes OUT_PREFIX.<rank>.json)
  divergent-tile     rank 0 asks for tile 4, rank 1 for tile 8; then both make a correct call
  divergent-routine  rank 0 calls potrs, rank 1 lu_solve; then both make a correct call
  divergent-switch   rank 1 sets another algorithm choice (jaxmg.config.update); then resets it
  divergent-env      rank 1 starts with another JAXMG_CPU_LU in its environment (read at the
                     first call); then both set the option alike
  retry              rank 0's first call raises a ValueError in Python and is retried
  absent-peer        rank 1 makes no call (JAXMG_CALL_TIMEOUT is set by the test)
  absent-peer-warm   both make one call (on GPUs: the context exists), then rank 1 no more
  injected-lu        lu_solve on the 1-D LU with a failure injected on one rank mid-algorithm
                     (the test hook test_fail=lu:<rank>:<tile column>), at three points; after
                     each, a call without it
  injected-inverse   potri's blocked inverse (L⁻¹ by blocks, then L⁻ᴴ L⁻¹) with a failure
                     injected on one rank (test_fail=inv_triangular:<rank>:<block> or
                     inv_cholesky:<rank>:<block>), at three points, and inv's blocked LU inverse
                     (cpu_inverses=blocked) at one (inv:<rank>:<block>, the product); after
                     each, a call without it
  injected-qr        qr on the 1-D QR (a 1 x 2 grid: mesh 1 x 2) with a failure injected on one
                     rank in the factorization (qr:<rank>:<tile column>) and in Q's formation
                     (orgqr:<rank>:<tile column from the last>); after each, a call without it
  injected-band      syevd by the two stages (cpu_eigh=two-stage) with a failure injected on
                     one rank in the band reduction (band_reduce:<rank>:<panel>), the chase on
                     rank 0 (band_eigh:0:0), the tridiagonal solve (band_eigh:<rank>:1), Q₂
                     (band_eigh:1:2), Q₁ (band_eigh:1:3), and in the eigenvalues' chase and
                     solve on rank 0 (band_eigvals:0:0); after each, a call without it
  injected-polar     polar (QDWH) of a matrix of condition 1e10 with a failure injected on one
                     rank (polar:<rank>:<step>) in the bounds, a QR step, a Cholesky step and
                     the Newton–Schulz step; after each, a call without it
"""

import faulthandler
import json
import os
import sys
import time
import traceback
from pathlib import Path

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402

import jaxmg  # noqa: E402
from jaxmg._core.testing import hooks  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from linalg_cases import A_SPEC, B_SPEC, gather, place, rhs, spd  # noqa: E402

scenario, prefix = sys.argv[1], sys.argv[2]
if os.environ.get("JAXMG_TEST_STACKS_AFTER"):  # where each process is, if it hangs
    faulthandler.dump_traceback_later(float(os.environ["JAXMG_TEST_STACKS_AFTER"]), exit=True)
me = jax.process_index()
mesh = jax.make_mesh((2, 1), ("pr", "pc"))
n = 48
a, b = spd(n, np.float64, 2), rhs(n, 2, np.float64, 2)
ap, bp = place(a, mesh, A_SPEC), place(b, mesh, B_SPEC)
ref = np.linalg.solve(a, b)
rec = {"rank": me, "scenario": scenario}


def attempt(fn, expect=None):
    """fn's result (or the product of its results, gathered) against expect (default: ref)."""
    t0 = time.perf_counter()
    try:
        out = fn()
        parts = out if isinstance(out, tuple) else (out,)
        # On GPUs a call's error arrives with its result: wait for it before the gather, a
        # collective of its own that would otherwise pair with a peer's next collective.
        for x in parts:
            x.block_until_ready()
        got = gather(parts[0])
        for x in parts[1:]:
            got = got @ gather(x)
        err = float(np.abs(got - (ref if expect is None else expect)).max())
        return {"ok": True, "error_max": err, "seconds": time.perf_counter() - t0}
    except Exception as e:  # noqa: BLE001 - the message is the result
        return {
            "ok": False,
            "type": type(e).__name__,
            "message": str(e)[:2000],
            "seconds": time.perf_counter() - t0,
            "trace": traceback.format_exc()[-1500:],
        }


if scenario == "divergent-tile":
    rec["first"] = attempt(lambda: jaxmg.potrs(ap, bp, T_A=4 if me == 0 else 8))
    rec["then"] = attempt(lambda: jaxmg.potrs(ap, bp, T_A=4))
elif scenario == "divergent-routine":
    fn = jaxmg.potrs if me == 0 else jaxmg.lu_solve
    rec["first"] = attempt(lambda: fn(ap, bp, T_A=4))
    rec["then"] = attempt(lambda: jaxmg.potrs(ap, bp, T_A=4))
elif scenario == "divergent-switch":
    # One process with another algorithm choice (part of every call's configuration).
    if me == 1:
        jaxmg.config.update("gpu_qr", "cusolvermp")
    rec["first"] = attempt(lambda: jaxmg.potrs(ap, bp, T_A=4))
    jaxmg.config.update("gpu_qr", "auto")
    rec["then"] = attempt(lambda: jaxmg.potrs(ap, bp, T_A=4))
elif scenario == "divergent-env":
    # One process with another JAXMG_CPU_LU before its first call, where the environment's
    # defaults are read (once: unsetting it later changes nothing).
    if me == 1:
        os.environ["JAXMG_CPU_LU"] = "scalapack"
    rec["first"] = attempt(lambda: jaxmg.potrs(ap, bp, T_A=4))
    os.environ.pop("JAXMG_CPU_LU", None)
    rec["default_cpu_lu"] = jaxmg.config.cpu_lu
    jaxmg.config.update("cpu_lu", "auto")
    rec["then"] = attempt(lambda: jaxmg.potrs(ap, bp, T_A=4))
elif scenario == "injected-lu":
    # The 2 x 1 mesh is a 1 x 2 engine grid: the 1-D LU (tile 4: twelve tile columns, steps).
    a_general = a + np.triu(np.ones((n, n)), 1)  # not symmetric: pivoting happens
    ag, ref = place(a_general, mesh, A_SPEC), np.linalg.solve(a_general, b)
    for point in ("lu:0:0", "lu:1:1", "lu:0:11"):
        with hooks(test_fail=point):
            rec[point] = attempt(lambda: jaxmg.lu_solve(ag, bp, T_A=4))
        rec[point + "/then"] = attempt(lambda: jaxmg.lu_solve(ag, bp, T_A=4))
elif scenario == "injected-inverse":
    # Tile 4: twelve tiles, blocks of two (six steps of each sweep).
    inverse = np.linalg.inv(a)
    for point in ("inv_triangular:1:2", "inv_cholesky:0:0", "inv_cholesky:1:5"):
        with hooks(test_fail=point):
            rec[point] = attempt(lambda: jaxmg.potri(ap, T_A=4), inverse)
        rec[point + "/then"] = attempt(lambda: jaxmg.potri(ap, T_A=4), inverse)
    with jaxmg.config.override(cpu_inverses="blocked"):
        with hooks(test_fail="inv:1:3"):
            rec["inv:1:3"] = attempt(lambda: jaxmg.inv(ap, T_A=4), inverse)
        rec["inv:1:3/then"] = attempt(lambda: jaxmg.inv(ap, T_A=4), inverse)
elif scenario == "injected-qr":
    # Tile 4 on a 48 x 24 matrix: six tile columns, three on each rank. The result checked is
    # Q R, against A.
    columns = jax.make_mesh((1, 2), ("pr", "pc"))
    tall = np.random.default_rng(3).standard_normal((n, n // 2))
    tp = place(tall, columns, A_SPEC)

    def qr_product():
        return jaxmg.qr(tp, T_A=4)  # (Q, R): their product is checked

    for point in ("qr:0:0", "qr:1:3", "qr:0:5", "orgqr:1:0", "orgqr:0:4"):
        with hooks(test_fail=point):
            rec[point] = attempt(qr_product, tall)
        rec[point + "/then"] = attempt(qr_product, tall)
elif scenario == "injected-band":
    # Tile 4 (a band of 4): twelve panels. The result checked is V diag(w) Vᴴ, against A.
    jaxmg.config.update("cpu_eigh", "two-stage")

    def rebuilt():
        w, v = jaxmg.syevd(ap, T_A=4)
        return v * w.reshape(1, -1), v.T  # (their product, gathered, is checked)

    def values():
        return jaxmg.syevd(ap, T_A=4, return_eigenvectors=False)

    points = ("band_reduce:1:1", "band_reduce:0:11", "band_eigh:0:0", "band_eigh:0:1")
    for point in points + ("band_eigh:1:1", "band_eigh:1:2", "band_eigh:1:3"):
        with hooks(test_fail=point):
            rec[point] = attempt(rebuilt, a)
        rec[point + "/then"] = attempt(rebuilt, a)
    with hooks(test_fail="band_eigvals:0:0"):
        rec["band_eigvals:0:0"] = attempt(values, np.linalg.eigvalsh(a))
    rec["band_eigvals:0:0/then"] = attempt(values, np.linalg.eigvalsh(a))
    # The eigenpairs 3..8 alone (Q₂ and Q₁ on those columns; each rank holds some of them):
    # V diag(w) Vᴴ of the kept pairs, against NumPy's.
    w_ref, v_ref = np.linalg.eigh(a)
    kept_ref = (v_ref[:, 3:9] * w_ref[3:9]) @ v_ref[:, 3:9].T

    def kept():
        w, v = jaxmg.syevd(ap, T_A=4, subset_by_index=(3, 9))
        return v * w.reshape(1, -1), v.T

    for point in ("band_eigh:0:1", "band_eigh:1:1", "band_eigh:1:2", "band_eigh:0:3"):
        with hooks(test_fail=point):
            rec["subset " + point] = attempt(kept, kept_ref)
        rec["subset " + point + "/then"] = attempt(kept, kept_ref)
elif scenario == "injected-polar":
    # 48 x 24, singular values from 1 to 1e-10: the bounds (step 0), two QR steps (1, 2), three
    # Cholesky steps (3-5) and Newton–Schulz (6). The result checked is Up H, against A.
    rng = np.random.default_rng(4)
    left = np.linalg.qr(rng.standard_normal((n, n // 2)))[0]
    right = np.linalg.qr(rng.standard_normal((n // 2, n // 2)))[0]
    ill = (left * np.logspace(0, -10, n // 2)) @ right.T
    ip = place(ill, mesh, A_SPEC)
    for point in ("polar:0:0", "polar:1:2", "polar:0:4", "polar:1:6"):
        with hooks(test_fail=point):
            rec[point] = attempt(lambda: jaxmg.polar(ip, T_A=4), ill)
        rec[point + "/then"] = attempt(lambda: jaxmg.polar(ip, T_A=4), ill)
elif scenario == "retry":
    if me == 0:
        rec["bad"] = attempt(lambda: jaxmg.potrs(ap, place(b[:-2], mesh, B_SPEC), T_A=4))
    rec["first"] = attempt(lambda: jaxmg.potrs(ap, bp, T_A=4))
elif scenario == "absent-peer":
    if me == 0:
        rec["first"] = attempt(lambda: jaxmg.potrs(ap, bp, T_A=4))
        rec["then"] = attempt(lambda: jaxmg.potrs(ap, bp, T_A=4))
elif scenario == "absent-peer-warm":
    rec["warm"] = attempt(lambda: jaxmg.potrs(ap, bp, T_A=4))
    if me == 0:
        rec["first"] = attempt(lambda: jaxmg.potrs(ap, bp, T_A=4))
        rec["then"] = attempt(lambda: jaxmg.potrs(ap, bp, T_A=4))
with open(f"{prefix}.{me}.json", "w") as f:
    json.dump(rec, f)
multihost_utils.sync_global_devices("agreement-done")
if scenario.startswith("absent-peer"):
    os._exit(0)  # a timed-out call leaves MPI unusable: no MPI_Finalize
