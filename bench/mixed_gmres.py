"""Which path mixed precision solves take near the float32 limit, and in how many steps.

  python bench/mixed_gmres.py OUT.json [--sizes 24 256] [--kappas 1e6 1e8] [--seeds 8]
  python bench/mixed_gmres.py --plot OUT.png A.json B.json ...   # steps of several runs

potrs and lu_solve with factor_dtype=float32 on one process (a 1x1 mesh), float64 matrices
Q diag(s) Qᵀ (SPD) and U diag(s) Vᵀ (general) with singular values log-spaced from 1 to 1/κ,
seeds 0..seeds-1, two right-hand sides. Each case records the path ("mixed": classical
refinement; "gmres": GMRES-IR; "fallback": the float64 factorization) and the refinement
steps; the table counts the paths and the steps per configuration. The JSON names the commit
(JAXMG_COMMIT or git's) and the matrices, so that two commits' runs compare case by case.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from collections import Counter


def conditioned(n, kappa, seed, spd):
    import numpy as np

    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    s = np.logspace(0, -np.log10(kappa), n)
    if spd:
        return (q * s) @ q.T
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return (q * s) @ v.T


def commit() -> str:
    if os.environ.get("JAXMG_COMMIT"):
        return os.environ["JAXMG_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], capture_output=True)
        return out.stdout.decode().strip() or "unknown"
    except OSError:
        return "unknown"


def measure(sizes, kappas, seeds):
    import jax
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    jax.config.update("jax_enable_x64", True)
    import jaxmg

    mesh = jax.make_mesh((1, 1), ("pr", "pc"))
    rows = []
    for n in sizes:
        for kappa in kappas:
            for routine in ("potrs", "lu_solve"):
                for seed in range(seeds):
                    a = conditioned(n, kappa, seed, routine == "potrs")
                    b = np.random.default_rng(seed + 100).standard_normal((n, 2))
                    a_g = jax.device_put(a, NamedSharding(mesh, P("pr", "pc")))
                    b_g = jax.device_put(b, NamedSharding(mesh, P("pr", None)))
                    x, status, info = getattr(jaxmg, routine)(
                        a_g,
                        b_g,
                        T_A=8,
                        factor_dtype="float32",
                        return_status=True,
                        return_info=True,
                    )
                    r = b - a @ np.asarray(x)
                    a_norm = np.max(np.sum(np.abs(a), axis=1))
                    den = a_norm * np.max(np.abs(np.asarray(x)), 0) + np.max(np.abs(b), 0)
                    rows.append(
                        dict(
                            routine=routine,
                            n=n,
                            kappa=kappa,
                            seed=seed,
                            path=info.path_name(),
                            steps=int(info.iterations),
                            status=int(status),
                            backward=float(np.max(np.max(np.abs(r), 0) / den)),
                        )
                    )
    return rows


def table(rows):
    groups = {}
    for r in rows:
        groups.setdefault((r["routine"], r["n"], r["kappa"]), []).append(r)
    print(f"{'routine':9} {'N':>5} {'kappa':>7}  {'mixed':>5} {'gmres':>5} {'fallback':>8}  steps")
    for (routine, n, kappa), rs in groups.items():
        paths = Counter(r["path"] for r in rs)
        steps = " ".join(str(r["steps"]) for r in rs)
        print(
            f"{routine:9} {n:5d} {kappa:7.0e}  {paths['mixed']:5d} {paths['gmres']:5d} "
            f"{paths['fallback']:8d}  {steps}"
        )


def plot(out, files):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [json.load(open(f)) for f in files]
    keys = sorted({(r["routine"], r["n"], r["kappa"]) for run in runs for r in run["cases"]})
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(runs)
    for i, run in enumerate(runs):
        for j, key in enumerate(keys):
            rs = [r for r in run["cases"] if (r["routine"], r["n"], r["kappa"]) == key]
            xs = [j + (i - (len(runs) - 1) / 2) * width] * len(rs)
            colors = ["tab:red" if r["path"] == "fallback" else f"C{i}" for r in rs]
            ax.scatter(
                xs,
                [r["steps"] for r in rs],
                c=colors,
                s=14,
                alpha=0.7,
                label=run["commit"] if j == 0 else None,
            )
    ax.set_xticks(range(len(keys)), [f"{k[0]}\nN={k[1]} κ={k[2]:.0e}" for k in keys], fontsize=7)
    ax.set_ylabel("refinement steps (red: fell back)")
    ax.legend(title="commit")
    fig.tight_layout()
    fig.savefig(out)
    print("wrote", out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("files", nargs="*", help="with --plot: the runs' JSON files")
    p.add_argument("--plot", action="store_true")
    p.add_argument("--sizes", type=int, nargs="+", default=[24, 256])
    p.add_argument("--kappas", type=float, nargs="+", default=[1e6, 1e8])
    p.add_argument("--seeds", type=int, default=8)
    args = p.parse_args()
    if args.plot:
        plot(args.out, args.files)
        return
    rows = measure(args.sizes, args.kappas, args.seeds)
    table(rows)
    res = dict(
        routine="mixed_gmres",
        commit=commit(),
        processes=1,
        factor_dtype="float32",
        matrix="log-spaced singular values, random orthogonal factors",
        cases=rows,
    )
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
