"""A design probe, not a benchmark of jaxmg: the blocked Cholesky factorization of one GPU in
float32 with TF32 products, written in torch over the same cuBLAS and cuSOLVER calls the GPU
engine's 1-D Cholesky makes (csrc/algorithms/cholesky_1d.h), to choose its block and its panel
solve before writing them in C++ (torch is row-major: A = Uᵀ U here, the same products).

    python bench/cholesky_blocks_probe.py OUT.json      (PN: the order, default 32768)

    python bench/cholesky_blocks_probe.py OUT.json --solves   (the solves with the factor alone)

It times the pieces (cusolverDn potrf of a tile, cuBLAS trsm with and without TF32, the trailing
products), the whole factorization by blocks of 512, 1024 and 2048, with the panel solve by trsm
or by the tile's inverse and a product, grouped products, a recursive variant and "3xTF32" (each
product split into TF32 parts, three products: float32's accuracy at a third of TF32's rate),
then the factors' accuracy at N = 8192 for condition numbers 1e3 and 1e6. It prints each
result as it goes and writes them all to OUT.json.
"""

import json
import os
import sys
import time

import torch

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
dev = "cuda"
out = {}
N = int(os.environ.get("PN", 32768))


def sync():
    torch.cuda.synchronize()


def timeit(f, reps=3):
    f()
    sync()
    best = 1e9
    for _ in range(reps):
        t = time.perf_counter()
        f()
        sync()
        best = min(best, time.perf_counter() - t)
    return best


def split(x):
    hi = (x.view(torch.int32) & -8192).view(torch.float32)  # keep 10 mantissa bits
    return hi, x - hi


def operands(X, mode):
    """The trailing update's operands L, R (the update is Lᵀ R): X itself, or for "3xtf32"
    [hi; hi; lo] and [hi; lo; hi] (three TF32 products in one, K three times as deep)."""
    if mode != "3xtf32":
        return X, X
    hi, lo = split(X)
    return torch.cat([hi, hi, lo], 0), torch.cat([hi, lo, hi], 0)


def chol(A, t, mode="tf32", trsm="trsm", group=1, times=None):
    """In place upper Cholesky of row-major A (A = Uᵀ U)."""
    n = A.shape[0]
    tiles = (n + t - 1) // t
    for k in range(tiles):
        r0 = k * t
        kb = min(t, n - r0)
        e0 = time.perf_counter() if times is not None else None
        d = A[r0 : r0 + kb, r0 : r0 + kb]
        U, info = torch.linalg.cholesky_ex(d.T.contiguous())  # lower of the symmetric block
        U = U.T.contiguous()  # upper
        d.copy_(U)
        if times is not None:
            sync()
            times["potrf"] += time.perf_counter() - e0
            e0 = time.perf_counter()
        if r0 + kb >= n:
            break
        A12 = A[r0 : r0 + kb, r0 + kb :]
        if trsm == "trsm":
            X = torch.linalg.solve_triangular(U.T, A12, upper=False)
        else:
            inv = torch.linalg.solve_triangular(U.T, torch.eye(kb, device=dev), upper=False)
            X = inv @ A12
        A12.copy_(X)
        if times is not None:
            sync()
            times["trsm"] += time.perf_counter() - e0
            e0 = time.perf_counter()
        L, R = operands(X, mode)
        m = n - r0 - kb
        w = t * group
        for j0 in range(0, m, w):
            ww = min(w, m - j0)
            # rows j0..j0+ww of the trailing matrix, from the diagonal right
            C = A[r0 + kb + j0 : r0 + kb + j0 + ww, r0 + kb + j0 :]
            C.addmm_(L[:, j0 : j0 + ww].T, R[:, j0:], alpha=-1)
        if times is not None:
            sync()
            times["gemm"] += time.perf_counter() - e0
    return A


def rec_chol(A, base, mode):
    """Recursive upper Cholesky in place."""
    n = A.shape[0]
    if n <= base:
        U, info = torch.linalg.cholesky_ex(A.T.contiguous())
        A.copy_(U.T)
        return
    h = (n // 2 + 255) // 256 * 256
    A11, A12, A22 = A[:h, :h], A[:h, h:], A[h:, h:]
    rec_chol(A11, base, mode)
    X = torch.linalg.solve_triangular(torch.triu(A11).T, A12, upper=False)
    A12.copy_(X)
    L, R = operands(X, mode)
    A22.addmm_(L.T, R, alpha=-1)  # full square (2x the syrk flops)
    rec_chol(A22, base, mode)


def spd(n, seed=0):
    g = torch.Generator(device=dev).manual_seed(seed)
    G = torch.randn(n, n, device=dev, generator=g) / n**0.5
    A = G @ G.T
    A += torch.eye(n, device=dev)
    return A


def spd_kappa(n, kappa, seed=0):
    g = torch.Generator(device=dev).manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(n, n, device=dev, dtype=torch.float64, generator=g))
    s = torch.logspace(
        0, -torch.log10(torch.tensor(kappa)).item(), n, device=dev, dtype=torch.float64
    )
    return (Q * s) @ Q.T


def solves(path):
    """The triangular solves with an N x N float32 factor (cuBLAS trsm through torch) for 1, 2, 3
    and 16 right-hand sides, a float32 and a float64 product with a vector, a float64 row-sum
    reduction and the float64 -> float32 copy, in ms: the refinement's pieces."""
    g = torch.Generator(device=dev).manual_seed(0)
    L = torch.tril(torch.randn(N, N, device=dev, generator=g)) / N**0.5
    L.diagonal().add_(2.0)
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "n": N}
    for k in (1, 2, 3, 16):
        b = torch.randn(N, k, device=dev)
        out[f"trsm_f32_lower_k{k}_ms"] = (
            timeit(lambda b=b: torch.linalg.solve_triangular(L, b, upper=False), 5) * 1e3
        )
        out[f"trsm_f32_upperT_k{k}_ms"] = (
            timeit(lambda b=b: torch.linalg.solve_triangular(L.T, b, upper=True), 5) * 1e3
        )
        out[f"cholesky_solve_f32_k{k}_ms"] = timeit(lambda b=b: torch.cholesky_solve(b, L), 5) * 1e3
    out["gemv_f32_ms"] = timeit(lambda: L @ torch.ones(N, 1, device=dev), 5) * 1e3
    L = None  # (frees the factor's memory for A)
    A = torch.randn(N, N, device=dev, dtype=torch.float64, generator=g)
    x = torch.randn(N, 1, device=dev, dtype=torch.float64)
    out["gemv_f64_ms"] = timeit(lambda: A @ x, 5) * 1e3
    out["abs_rowsum_f64_ms"] = timeit(lambda: A.abs().sum(1).max(), 5) * 1e3
    out["astype_f32_ms"] = timeit(lambda: A.float(), 5) * 1e3
    print(json.dumps(out, indent=1))
    json.dump(out, open(path, "w"), indent=1)


if "--solves" in sys.argv:
    solves(sys.argv[1])
    sys.exit(0)

res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "n": N}
A0 = spd(N)
flops = N**3 / 3


# Components (N = 32768, t = 1024 and 2048)
def pieces(t):
    """The pieces' times (ms) at block t: potrf of a tile, the panel's trsm, its products."""
    d = spd(t)
    out = {f"potrf_{t}_ms": timeit(lambda: torch.linalg.cholesky_ex(d)) * 1e3}
    B = torch.randn(t, N - t, device=dev)
    Ut = torch.linalg.cholesky(d)
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        ms = timeit(lambda: torch.linalg.solve_triangular(Ut, B, upper=False)) * 1e3
        out[f"trsm_{t}_{'tf32' if tf32 else 'fp32'}_ms"] = ms
    out[f"gemm_{N - t}x{t}x{t}_tf32_ms"] = timeit(lambda: B.T @ B[:, :t]) * 1e3
    C = torch.empty(N - t, N - t, device=dev)
    out[f"gemm_full_{N - t}x{N - t}x{t}_tf32_ms"] = timeit(lambda: torch.mm(B.T, B, out=C)) * 1e3
    return out


for t in (1024, 2048):
    res.update(pieces(t))
print(json.dumps(res, indent=1), flush=True)
res["jobs"] = []
for name, f in [
    ("torch_cholesky_fp32", lambda A: torch.linalg.cholesky_ex(A)),
    ("blocked_t1024", lambda A: chol(A, 1024)),
    ("blocked_t2048", lambda A: chol(A, 2048)),
    ("blocked_t512", lambda A: chol(A, 512)),
    ("blocked_t1024_inv", lambda A: chol(A, 1024, trsm="inv")),
    ("blocked_t2048_inv", lambda A: chol(A, 2048, trsm="inv")),
    ("blocked_t1024_g4", lambda A: chol(A, 1024, group=4)),
    ("blocked_t1024_inv_g4", lambda A: chol(A, 1024, trsm="inv", group=4)),
    ("rec_b1024", lambda A: rec_chol(A, 1024, "tf32")),
    ("rec_b2048", lambda A: rec_chol(A, 2048, "tf32")),
    ("blocked_t1024_3x", lambda A: chol(A, 1024, mode="3xtf32")),
    ("blocked_t1024_inv_3x", lambda A: chol(A, 1024, trsm="inv", mode="3xtf32")),
    ("rec_b1024_3x", lambda A: rec_chol(A, 1024, "3xtf32")),
]:
    A = A0.clone()
    best = 1e9
    for _ in range(2):
        A.copy_(A0)
        sync()
        t0 = time.perf_counter()
        f(A)
        sync()
        best = min(best, time.perf_counter() - t0)
    rec = {"name": name, "s": best, "tflops": flops / best / 1e12}
    print(rec, flush=True)
    res["jobs"].append(rec)
    del A
torch.cuda.empty_cache()
# Breakdown of the current algorithm
for t in (1024, 2048):
    times = {"potrf": 0.0, "trsm": 0.0, "gemm": 0.0}
    A = A0.clone()
    sync()
    chol(A, t, times=times)
    sync()
    res[f"breakdown_t{t}"] = times
    print(t, times, flush=True)
    del A
del A0
torch.cuda.empty_cache()
# Accuracy at n = 8192 with kappa 1e3 and 1e6: ‖A - UᵀU‖ / ‖A‖ and ‖I - (UᵀU)⁻¹A‖ estimate
n = 8192
acc = []
for kappa in (1e3, 1e6):
    A64 = spd_kappa(n, kappa)
    for name, f in [
        ("fp32_torch", None),
        ("tf32", lambda A: chol(A, 1024)),
        ("3xtf32", lambda A: chol(A, 1024, mode="3xtf32")),
        ("tf32_inv", lambda A: chol(A, 1024, trsm="inv")),
        ("3xtf32_inv", lambda A: chol(A, 1024, trsm="inv", mode="3xtf32")),
    ]:
        A = A64.float().clone()
        if f is None:
            torch.backends.cuda.matmul.allow_tf32 = False
            Lr, info = torch.linalg.cholesky_ex(A)
            U = Lr.T
            info = int(info)
            torch.backends.cuda.matmul.allow_tf32 = True
        else:
            f(A)
            U = torch.triu(A)
            info = 0
        U64 = U.double()
        fe = (torch.linalg.matrix_norm(A64 - U64.T @ U64) / torch.linalg.matrix_norm(A64)).item()
        # contraction of classical refinement: ‖I − (UᵀU)⁻¹ A‖₂ by power steps on a vector
        x = torch.randn(n, 1, device=dev, dtype=torch.float64)
        for _ in range(8):
            y = x - torch.cholesky_solve(A64 @ x, U64.T)
            rho = (torch.linalg.norm(y) / torch.linalg.norm(x)).item()
            x = y / torch.linalg.norm(y)
        r = {
            "kappa": kappa,
            "variant": name,
            "factor_rel_err": fe,
            "contraction": rho,
            "finite": bool(torch.isfinite(U).all()),
        }
        print(r, flush=True)
        acc.append(r)
res["accuracy_n8192"] = acc
json.dump(res, open(sys.argv[1], "w"), indent=1)
