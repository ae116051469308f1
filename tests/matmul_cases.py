"""Cases of matmul (the engine's distributed product of two square matrices), shared by the
CPU and GPU workers; each returns a record with "ok": C against NumPy within 10 n eps ‖A‖ ‖B‖,
in a's sharding."""

from __future__ import annotations

import jax
import numpy as np
from linalg_cases import A_SPEC, DTYPES, gather, place


def matmul_case(mesh, dtype_name, n, tile, op, variant=""):
    """op: "nn" (A B), "cn" (Aᴴ B), "nc" (A Bᴴ); variant: "jit"."""
    import jaxmg

    dtype = DTYPES[dtype_name]
    rng = np.random.default_rng(n + 31)
    a, b = rng.standard_normal((2, n, n))
    if np.issubdtype(dtype, np.complexfloating):
        a, b = a + 1j * rng.standard_normal((n, n)), b + 1j * rng.standard_normal((n, n))
    a, b = a.astype(dtype), b.astype(dtype)
    ap, bp = place(a, mesh, A_SPEC), place(b, mesh, A_SPEC)
    adj_a, adj_b = op[0] == "c", op[1] == "c"

    def fn(x, y):
        return jaxmg.matmul(x, y, adj_a, adj_b, T_A=tile)

    c = jax.jit(fn)(ap, bp) if variant == "jit" else fn(ap, bp)
    a64, b64 = a.astype(np.complex128), b.astype(np.complex128)
    ref = (a64.conj().T if adj_a else a64) @ (b64.conj().T if adj_b else b64)
    eps = float(np.finfo(dtype).eps)
    scale = np.linalg.norm(a64, 2) * np.linalg.norm(b64, 2)
    err = float(np.abs(gather(c) - ref).max() / scale)
    rec = dict(n=n, product_error=err, tol=10 * n * eps, spec=str(c.sharding.spec))
    rec["ok"] = bool(err <= rec["tol"] and c.sharding.spec == ap.sharding.spec)
    return rec


def matmul_plan(n, tiles=(None, 5)):
    """[(name, kind, params)]: four dtypes x tiles x the three products, and one in a jit."""
    from solve_plan import DTYPE_NAMES

    plan = []
    for dtype_name in DTYPE_NAMES:
        for tile in tiles:
            for op in ("nn", "cn", "nc"):
                params = dict(dtype_name=dtype_name, n=n, tile=tile, op=op)
                plan.append((f"matmul/{dtype_name}/n{n}/T{tile}/{op}", "matmul", params))
    params = dict(dtype_name="complex128", n=n, tile=4, op="cn", variant="jit")
    plan.append((f"matmul/complex128/n{n}/T4/cn/jit", "matmul", params))
    return plan
