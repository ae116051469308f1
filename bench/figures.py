"""The documentation's figures, drawn from data in the repository: `python bench/figures.py`.

Benchmark figures come from the JSON files in bench/results (each names the commit it measured);
the layout diagrams from the relabeling rule of docs/layout.md. Everything is written as SVG
into docs/figures/ (`--out DIR` elsewhere; `--check` redraws into a temporary folder and fails
when a committed figure differs, which the docs test runs).

Needs matplotlib (`pip install matplotlib`, the bench extra).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
FIGURES = ROOT / "docs" / "figures"

# Colors: jaxmg, JAX, JAXMg 1.4.1; devices in the layout diagrams.
JAXMG, JAX, PEER = "#1f77b4", "#7f7f7f", "#ff7f0e"
DEVICE_COLORS = ("#8ecae6", "#ffb703", "#90be6d", "#f4978e", "#cdb4db", "#bde0fe")

# The routines of the comparison figure: (label, N, one-H200 file, two-H200 file, its mesh).
# The reference is JAX's fastest documented option on one H200 (for the SVD and polar,
# SvdAlgorithm.POLAR and QDWH among them), timed in the one-H200 file's run on random
# matrices beside jaxmg on the same GPU (and JAXMg 1.4.1 where it ran there). The two-H200
# bars are earlier runs (Kac-Murdock-Szego matrices, r = 0.5), kept with their date.
ONE_H200 = "random_h200x1_4dd9ee2"
COMPARISON = (
    (
        "potrs",
        65536,
        f"potrs_65536_{ONE_H200}.json",
        "potrs_h200x2_mesh1x2_donate_015400a.json",
        [1, 2],
    ),
    (
        "lu_solve",
        65536,
        f"lu_solve_65536_{ONE_H200}.json",
        "lu_solve_h200x2_mesh2x1_own_lu_tiles_8287341.json",
        [2, 1],
    ),
    (
        "potri",
        32768,
        f"potri_32768_{ONE_H200}.json",
        "potri_h200x2_n32768_65536_16c5668.json",
        [2, 1],
    ),
    ("inv", 32768, f"inv_32768_{ONE_H200}.json", "inv_h200x2_n32768_f0bcf18.json", [2, 1]),
    ("qr", 32768, f"qr_32768_{ONE_H200}.json", "qr_h200x2_f190c6d.json", [2, 1]),
    (
        "lstsq\n65536 x 16384",
        65536,
        f"least_squares_65536x16384_{ONE_H200}.json",
        "least_squares_h200x2_65536x16384_6251758.json",
        [2, 1],
    ),
    (
        "syevd",
        32768,
        f"syevd_32768_{ONE_H200}.json",
        "syevd_32768_T256_h200x2_50138e9.json",
        [2, 1],
    ),
    (
        "svd values",
        16384,
        f"gesvd_values_16384_{ONE_H200}.json",
        "gesvd_values_qdwh_h200x2_n8192_16384_afafeca.json",
        [2, 1],
    ),
    (
        "polar",
        16384,
        f"polar_16384_{ONE_H200}.json",
        "polar_qdwh_h200x2_n8192_16384_ba5a750.json",
        [2, 1],
    ),
    ("svd U s Vh", 8192, f"gesvd_8192_{ONE_H200}.json", "gesvd_h200x2_n8192_01670a2.json", [2, 1]),
)

# Tile sweeps: (title, [(label, file, mesh)]).
TILE_SWEEPS = (
    (
        "potrs, N = 65536",
        [
            ("mesh 2x1", "sweep_tiles_2x1_h200x2_e81b98d.json", [2, 1]),
            ("mesh 1x2", "sweep_tiles_1x2_h200x2_e81b98d.json", [1, 2]),
        ],
    ),
    (
        "lu_solve, N = 65536",
        [
            (
                "mesh 2x1, jaxmg's 1-D LU",
                "lu_solve_h200x2_mesh2x1_own_lu_tiles_8287341.json",
                [2, 1],
            ),
            (
                "mesh 2x1, cuSOLVERMp",
                "lu_solve_cusolvermp_tile_sweep_2x1_h200x2_b31b356.json",
                [2, 1],
            ),
        ],
    ),
    (
        "syevd, N = 16384",
        [("mesh 2x1", "syevd_tiles_16384_h200x2_50138e9.json", [2, 1])],
    ),
    (
        "polar, N = 16384",
        [
            ("mesh 2x1, QDWH", "polar_qdwh_tiles_16384_h200x2_ba5a750.json", [2, 1]),
            ("mesh 2x1, cuSOLVERMp", "polar_tiles_16384_h200x2_50138e9.json", [2, 1]),
        ],
    ),
)


def load(name: str) -> list[dict]:
    """The records of one result file."""
    return json.loads((RESULTS / name).read_text())["records"]


def best(records, engine, n, mesh=None, dtype="float64"):
    """The least time of an engine at order n (and mesh), or None."""
    times = [
        r["seconds"]
        for r in records
        if r["engine"] == engine
        and r["n"] == n
        and r.get("dtype", dtype) == dtype
        and "seconds" in r
        and (mesh is None or engine == "jax" or r.get("mesh") == mesh)
    ]
    return min(times) if times else None


def _setup():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "svg.fonttype": "none",  # text stays text: small files, the page's font
            "svg.hashsalt": "jaxmg",  # stable ids: the same data draws the same file
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    return plt


def _save(fig, path: Path) -> Path:
    fig.savefig(path, format="svg", metadata={"Date": None}, bbox_inches="tight")
    return path


def measured_on(name: str) -> str:
    """The date of the commit a result file measured (its "commit" field), from git."""
    import subprocess

    commit = json.loads((RESULTS / name).read_text()).get("commit") or ""
    out = subprocess.run(
        ["git", "-C", str(ROOT), "show", "-s", "--format=%cs", commit[:12]],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or "date unknown"


def jax_option(records, n):
    """The name of JAX's fastest option in a file at order n, where it timed several."""
    for r in records:
        if r["engine"] == "jax" and r["n"] == n and r.get("jax_option"):
            return r["jax_option"]
    return None


def comparison(plt, out: Path) -> Path:
    """Bars: each routine's time relative to JAX's fastest option on one H200 (lower is
    faster): jaxmg and JAXMg 1.4.1 on the same H200, and jaxmg and JAXMg on two H200s (earlier
    runs, dated)."""
    import numpy as np

    rows = []
    two_dates = set()
    for label, n, one, two, mesh in COMPARISON:
        r1, r2 = load(one), load(two)
        two_dates.add(measured_on(two))
        option = jax_option(r1, n)
        rows.append(
            dict(
                label=f"{label}\nN={n}" if "\n" not in label else label,
                jax=best(r1, "jax", n),
                option=option,
                times=(
                    best(r1, "jaxmg", n, [1, 1]),
                    best(r1, "jaxmg-1.x", n),
                    best(r2, "jaxmg", n, mesh),
                    best(r2, "jaxmg-1.x", n),
                ),
            )
        )
    one_date = measured_on(COMPARISON[0][2])
    two_date = ", ".join(sorted(two_dates))
    series = (
        (f"jaxmg, 1 H200 ({one_date})", JAXMG, None),
        (f"JAXMg 1.4.1, 1 H200 ({one_date})", PEER, None),
        (f"jaxmg, 2 H200 ({two_date})", JAXMG, "//"),
        (f"JAXMg 1.4.1, 2 H200 ({two_date})", PEER, "//"),
    )
    fig, ax = plt.subplots(figsize=(12.5, 4.0))
    x = np.arange(len(rows))
    w = 0.2
    for k, (name, color, hatch) in enumerate(series):
        heights = [r["times"][k] / r["jax"] if r["times"][k] else np.nan for r in rows]
        face = color if hatch is None else "white"
        bars = ax.bar(
            x + (k - 1.5) * w, heights, w, label=name, color=face, edgecolor=color, hatch=hatch
        )
        for bar, h, r in zip(bars, heights, rows, strict=True):
            if np.isfinite(h):
                ax.annotate(
                    f"{r['times'][k]:.2f} s",
                    (bar.get_x() + bar.get_width() / 2, min(h, 2.2)),
                    ha="center",
                    va="bottom",
                    fontsize=6,
                    rotation=90,
                    xytext=(0, 2),
                    textcoords="offset points",
                )
    ax.axhline(1.0, color=JAX, linewidth=0.8, linestyle="--")
    ticks = []
    for r in rows:
        option = f"\n({r['option']})" if r["option"] else ""
        ticks.append(f"{r['label']}\nJAX {r['jax']:.2f} s{option}")
    ax.set_xticks(x, ticks, fontsize=6.5)
    ax.set_ylabel("time relative to JAX's fastest, 1 H200")
    ax.set_ylim(0, 2.6)
    ax.set_title(
        "float64: lower is faster (1 H200: random matrices; 2 H200: Kac-Murdock-Szego, r = 0.5)"
    )
    ax.legend(ncols=2, loc="upper left", frameon=False, fontsize=7)
    return _save(fig, out / "routines_vs_jax.svg")


def potrs_scaling(plt, out: Path) -> Path:
    """potrs time against N: jaxmg on 1 and 2 H200s, JAX on one."""
    two = load("potrs_h200x2_e81b98d.json")
    one = load("potrs_h200x1_scaling_e56b6b5.json")
    fig, ax = plt.subplots(figsize=(6.0, 3.6))

    def series(records, engine, mesh=None):
        ns = sorted({r["n"] for r in records if r["engine"] == engine and "seconds" in r})
        pts = [(n, best(records, engine, n, mesh)) for n in ns]
        return [p for p in pts if p[1] is not None]

    for label, pts, color, style in (
        ("jaxmg, 2 H200 (mesh 2x1)", series(two, "jaxmg", [2, 1]), JAXMG, "-"),
        ("jaxmg, 1 H200", series(one, "jaxmg"), JAXMG, ":"),
        ("JAX, 1 H200", series(two, "jax"), JAX, "--"),
    ):
        ax.plot(*zip(*pts, strict=True), marker="o", color=color, linestyle=style, label=label)
    oom = [r["n"] for r in one if r["engine"] == "jax" and "error" in r]
    if oom:
        ax.annotate(
            f"JAX: out of memory\nat N = {oom[0]}",
            (oom[0], best(one, "jaxmg", oom[0])),
            xytext=(-90, 20),
            textcoords="offset points",
            arrowprops={"arrowstyle": "->", "color": JAX},
            color=JAX,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("N")
    ax.set_ylabel("seconds (factorization, solve, log det)")
    ax.set_title("potrs, float64")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(frameon=False)
    return _save(fig, out / "potrs_scaling.svg")


# Time against N with all three side by side: (title, result file, jaxmg's mesh).
SIDE_BY_SIDE = (
    ("qr", "qr_h200x2_f190c6d.json", [2, 1]),
    ("singular values", "gesvd_values_qdwh_h200x2_n8192_16384_afafeca.json", [2, 1]),
    ("polar", "polar_qdwh_h200x2_n8192_16384_ba5a750.json", [2, 1]),
)


def side_by_side(plt, out: Path) -> Path:
    """Time against N of jaxmg and JAXMg 1.4.1 on two H200s and JAX on one, per routine."""
    fig, axes = plt.subplots(1, len(SIDE_BY_SIDE), figsize=(9.6, 3.2))
    for ax, (title, name, mesh) in zip(axes, SIDE_BY_SIDE, strict=True):
        records = load(name)
        for engine, label, color, style in (
            ("jaxmg", "jaxmg, 2 H200", JAXMG, "-"),
            ("jaxmg-1.x", "JAXMg 1.4.1, 2 H200", PEER, "-."),
            ("jax", "JAX, 1 H200", JAX, "--"),
        ):
            ns = sorted({r["n"] for r in records if r["engine"] == engine and "seconds" in r})
            pts = [(n, best(records, engine, n, mesh)) for n in ns]
            pts = [p for p in pts if p[1] is not None]
            if pts:
                ax.plot(
                    *zip(*pts, strict=True), marker="o", color=color, linestyle=style, label=label
                )
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.set_xticks(sorted({r["n"] for r in records}))
        ax.get_xaxis().set_major_formatter(plt.matplotlib.ticker.ScalarFormatter())
        ax.minorticks_off()
        ax.set_title(f"{title}, float64")
        ax.set_xlabel("N")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("seconds")
    axes[0].legend(frameon=False, fontsize=7)
    fig.tight_layout()
    return _save(fig, out / "time_vs_n.svg")


def tile_sweeps(plt, out: Path) -> Path:
    """Time against the tile, one panel per routine, JAX on one H200 as a dashed line."""
    fig, axes = plt.subplots(2, 2, figsize=(8.0, 6.0))
    for ax, (title, lines) in zip(axes.flat, TILE_SWEEPS, strict=True):
        for k, (label, name, mesh) in enumerate(lines):
            records = [r for r in load(name) if r["engine"] == "jaxmg" and "seconds" in r]
            records = [r for r in records if r.get("mesh") == mesh]
            pts = sorted((r["tile"], r["seconds"]) for r in records)
            ax.plot(*zip(*pts, strict=True), marker="o", label=label, linestyle=("-", "--")[k])
            jax_s = [r["seconds"] for r in load(name) if r["engine"] == "jax" and "seconds" in r]
            if jax_s:
                ax.axhline(min(jax_s), color=JAX, linestyle=":", linewidth=1)
                ax.annotate(
                    "JAX, 1 GPU",
                    (pts[0][0], min(jax_s)),
                    color=JAX,
                    fontsize=7,
                    xytext=(0, 3),
                    textcoords="offset points",
                )
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({t for _, n, _ in lines for t in _tiles(n)}))
        ax.get_xaxis().set_major_formatter(plt.matplotlib.ticker.ScalarFormatter())
        ax.minorticks_off()
        ax.set_title(title)
        ax.set_xlabel("tile T_A")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, frameon=False, loc="lower left")
    for ax in axes[:, 0]:
        ax.set_ylabel("seconds, 2 H200")
    fig.tight_layout()
    return _save(fig, out / "tile_sweeps.svg")


def _tiles(name):
    return [r["tile"] for r in load(name) if r["engine"] == "jaxmg" and r.get("tile")]


def relabel(k_tiles: int, parts: int) -> list[int]:
    """The tile of A at each position of the engine's matrix B = Π A Πᵀ (docs/layout.md):
    position k holds tile (k mod P)·m + k div P, m = K / P tiles per shard."""
    m = k_tiles // parts
    return [(k % parts) * m + k // parts for k in range(k_tiles)]


def _grid(ax, owner, labels, title):
    """Draws a K x K grid of tiles colored by owner[i][j], with labels[i][j]."""
    from matplotlib.patches import Rectangle

    k = len(owner)
    for i in range(k):
        for j in range(k):
            ax.add_patch(
                Rectangle(
                    (j, k - 1 - i),
                    1,
                    1,
                    facecolor=DEVICE_COLORS[owner[i][j]],
                    edgecolor="white",
                    linewidth=1.5,
                )
            )
            ax.text(j + 0.5, k - 0.5 - i, labels[i][j], ha="center", va="center", fontsize=6.5)
    ax.set_xlim(0, k)
    ax.set_ylim(0, k)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title(title, fontsize=8.5)


def layout(plt, out: Path, rows: int, cols: int, k_tiles: int = 8) -> Path:
    """Three panels for a rows x cols mesh: JAX's block shards of A, the engine's matrix B (the
    same shards, tiles relabeled) and the standard block-cyclic owners of B's tiles, which
    coincide with the second panel: nothing moves."""
    m_r, m_c = k_tiles // rows, k_tiles // cols
    device = [[(i // m_r) * cols + j // m_c for j in range(k_tiles)] for i in range(k_tiles)]
    names = [[f"{i},{j}" for j in range(k_tiles)] for i in range(k_tiles)]
    pr, pc = relabel(k_tiles, rows), relabel(k_tiles, cols)
    b_owner = [[device[pr[i]][pc[j]] for j in range(k_tiles)] for i in range(k_tiles)]
    b_names = [[names[pr[i]][pc[j]] for j in range(k_tiles)] for i in range(k_tiles)]
    cyclic = [[(i % rows) * cols + j % cols for j in range(k_tiles)] for i in range(k_tiles)]
    fig, axes = plt.subplots(1, 3, figsize=(9.0, 3.3))
    mesh = f"{rows}x{cols}"
    _grid(axes[0], device, names, f"A as JAX shards it (mesh {mesh}):\ntile i,j on device")
    _grid(axes[1], b_owner, b_names, "B = Π A Πᵀ: A's tiles relabeled,\neach still on its device")
    _grid(
        axes[2],
        cyclic,
        [[""] * k_tiles for _ in range(k_tiles)],
        f"block-cyclic owners of a {rows}x{cols} grid:\nthe same colors",
    )
    from matplotlib.patches import Patch

    handles = [Patch(color=DEVICE_COLORS[d], label=f"device {d}") for d in range(rows * cols)]
    fig.legend(handles=handles, loc="lower center", ncols=rows * cols, frameon=False)
    fig.subplots_adjust(bottom=0.12)
    return _save(fig, out / f"layout_{mesh}.svg")


# Mixed precision solves against the condition number (bench/mixed_kappa.sh): CPU processes.
MIXED_KAPPA = "mixed_kappa_cpu2_n2048_afd8363.json"
PATH_MARKERS = {
    "mixed": ("o", "classical refinement"),
    "gmres": ("s", "GMRES-IR"),
    "fallback": ("x", "fallback to float64"),
}


def mixed_precision(plt, out: Path) -> Path:
    """Time against κ of potrs and lu_solve factored in float32 and refined to float64 (each
    point marked by the path it took, its refinement steps beside it), in float64, and JAX's
    float64 solve on one device."""
    data = json.loads((RESULTS / MIXED_KAPPA).read_text())
    records = data["records"]
    n = records[0]["n"]
    procs = next(r["processes"] for r in records if r["engine"] == "jaxmg")
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.4), sharey=False)
    for ax, routine in zip(axes, ("potrs", "lu_solve"), strict=True):
        mine = [r for r in records if r["bench_routine"] == routine and "seconds" in r]

        def series(engine, variant, mine=mine):
            rs = sorted(
                (r for r in mine if r["engine"] == engine and r["variant"] == variant),
                key=lambda r: r["kappa"],
            )
            return [r["kappa"] for r in rs], [r["seconds"] for r in rs], rs

        k, t, _ = series("jaxmg", "float64")
        ax.plot(k, t, color=JAXMG, label=f"jaxmg float64, {procs} processes")
        k, t, _ = series("jax", "float64")
        ax.plot(k, t, color=JAX, linestyle="--", label="JAX float64, 1 process")
        k, t, rs = series("jaxmg", "mixed")
        ax.plot(k, t, color=PEER, linewidth=0.8)
        for path, (marker, label) in PATH_MARKERS.items():
            pts = [(r["kappa"], r["seconds"]) for r in rs if r["path"] == path]
            if pts:
                ax.scatter(
                    *zip(*pts, strict=True), marker=marker, color=PEER, label=label, zorder=3
                )
        for r in rs:
            ax.annotate(
                str(r["iterations"]),
                (r["kappa"], r["seconds"]),
                fontsize=7,
                xytext=(4, 4),
                textcoords="offset points",
            )
        ax.set_xscale("log")
        ax.set_xlabel("condition number κ₂")
        ax.set_title(f"{routine}, N = {n}, float32 factor (orange; steps beside)", fontsize=8)
        ax.set_ylim(bottom=0)
    axes[0].set_ylabel("seconds (best warm call)")
    axes[1].legend(frameon=False, fontsize=7, loc="upper left")
    return _save(fig, out / "mixed_precision_kappa.svg")


# Mixed precision potrs against the condition number on one GPU: the 1-D Cholesky in TF32.
MIXED_KAPPA_GPU = "mixed_kappa_h100x1_n32768_tf32_9af010f.json"


def mixed_precision_gpu(plt, out: Path) -> Path:
    """Time and refinement steps against κ of potrs factored by the 1-D Cholesky in TF32 and
    refined to float64 on one GPU (each point marked by the path it took), with float64 potrs
    and JAX's float64 solve on the same GPU (their time does not depend on κ: one line each)."""
    data = json.loads((RESULTS / MIXED_KAPPA_GPU).read_text())
    records = data["records"]
    n = records[0]["n"]
    card = data["device"].split(" (")[0].removeprefix("NVIDIA ")
    mixed = sorted(
        (r for r in records if r["engine"] == "jaxmg" and r["variant"] == "mixed"),
        key=lambda r: r["kappa"],
    )
    k = [r["kappa"] for r in mixed]
    fig, (ax, steps) = plt.subplots(1, 2, figsize=(9.6, 3.4))
    for engine, color, style, label in (
        ("jaxmg", JAXMG, "-", "jaxmg float64 potrs"),
        ("jax", JAX, "--", "JAX float64 cho_factor + cho_solve"),
    ):
        t = next(
            r["seconds"] for r in records if r["engine"] == engine and r["variant"] == "float64"
        )
        ax.axhline(t, color=color, linestyle=style, label=label)
    ax.plot(k, [r["seconds"] for r in mixed], color=PEER, linewidth=0.8)
    steps.plot(k, [r["iterations"] for r in mixed], color=PEER, linewidth=0.8)
    for path, (marker, label) in PATH_MARKERS.items():
        rs = [r for r in mixed if r["path"] == path]
        if rs:
            kk = [r["kappa"] for r in rs]
            ax.scatter(
                kk, [r["seconds"] for r in rs], marker=marker, color=PEER, label=label, zorder=3
            )
            steps.scatter(kk, [r["iterations"] for r in rs], marker=marker, color=PEER, zorder=3)
    for a in (ax, steps):
        a.set_xscale("log")
        a.set_xlabel("condition number κ₂")
        a.set_ylim(bottom=0)
    ax.set_ylabel("seconds (warm call)")
    ax.set_title(f"potrs, N = {n}, float64 answers, one {card}", fontsize=8)
    steps.set_ylabel("refinement steps")
    steps.set_title("steps taken (0: the fallback ran at once)", fontsize=8)
    ax.legend(frameon=False, fontsize=7, loc="upper left")
    return _save(fig, out / "mixed_precision_kappa_gpu.svg")


# Eigenpairs by index on CPU processes (python -m jaxmg bench --routine syevd --subset lo:hi).
SUBSET_CPU = "cpu_syevd_subset_2proc_1670d12.json"
SUBSET_PATHS = {"two-stage": (JAXMG, "o"), "p?syevr": (PEER, "s")}


def eigenpairs_by_index(plt, out: Path) -> Path:
    """Time against k of syevd's subset_by_index (the k lowest, and k in the middle of the
    spectrum, hollow) by the two stages with Q₂ and Q₁ on the k columns and by p?syevr, beside
    the time of every pair (p?syevd, the two stages), one panel per mesh."""
    data = json.loads((RESULTS / SUBSET_CPU).read_text())
    records = data["records"]
    meshes = sorted({tuple(r["mesh"]) for r in records}, reverse=True)
    fig, axes = plt.subplots(1, len(meshes), figsize=(4.8 * len(meshes), 3.2), sharey=True)
    for ax, mesh in zip(axes, meshes, strict=True):
        mine = [r for r in records if tuple(r["mesh"]) == mesh]
        for r in (r for r in mine if r["lo"] is None):
            style = "--" if r["path"] == "p?syevd" else ":"
            ax.axhline(r["seconds"], color=JAX, linestyle=style, label=f"every pair, {r['path']}")
        for path, (color, marker) in SUBSET_PATHS.items():
            rs = sorted(
                (r for r in mine if r["path"] == path and r["lo"] is not None),
                key=lambda r: (r["hi"] - r["lo"], r["lo"]),
            )
            lowest = [r for r in rs if r["lo"] == 0]
            middle = [r for r in rs if r["lo"] != 0]
            ax.plot(
                [r["hi"] for r in lowest],
                [r["seconds"] for r in lowest],
                marker=marker,
                color=color,
                label=f"k lowest, {path}",
            )
            ax.scatter(
                [r["hi"] - r["lo"] for r in middle],
                [r["seconds"] for r in middle],
                marker=marker,
                facecolors="none",
                edgecolors=color,
                label=f"k in the middle, {path}",
                zorder=3,
            )
        n = mine[0]["n"]
        ks = sorted({r["hi"] - r["lo"] for r in mine if r["lo"] is not None})
        ax.set_xscale("log")
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.minorticks_off()
        ax.set_xlabel("k (eigenpairs kept)")
        ax.set_title(f"syevd, N = {n} float64, mesh {mesh[0]}x{mesh[1]} (2 processes)", fontsize=8)
        ax.set_ylim(0, 1.1 * max(r["seconds"] for r in records))
    axes[0].set_ylabel("seconds (best warm call)")
    axes[-1].legend(frameon=False, fontsize=7, loc="lower right")
    return _save(fig, out / "eigenpairs_by_index_cpu.svg")


# Eigenpairs by index on one GPU, with the stage breakdown (scripts/gpu_remote.sh subset).
SUBSET_GPU = (
    "syevd_subset_32768_0-328_random_h100x1_819bd8d.json",
    "syevd_subset_32768_0-3277_random_h100x1_819bd8d.json",
    "syevd_subset_32768_all_random_h100x1_47058e3.json",
)
# (the stages as the engine names them; the band reduction is the two stages' rest)
SUBSET_STAGES = (
    ("band reduction", None),
    ("chase", "BandToTridiagonal (vectors)"),
    ("Stedc", "Stedc"),
    ("Q₂", "Q2 (chase reflectors)"),
    ("Q₁", "Q1 (band reduction)"),
)


def eigenpairs_by_index_gpu(plt, out: Path) -> Path:
    """The two stages' time by stage for the k lowest pairs and for all of them, N = 32768 on
    one GPU, with JAX's full eigh sliced (its subset_by_index is not implemented on GPUs) and
    the 3.0 s target for k = N/10."""
    runs = []
    for name in SUBSET_GPU:
        data = json.loads((RESULTS / name).read_text())
        mine = next(r for r in data["records"] if r["engine"] == "jaxmg")
        jax_s = [r["seconds"] for r in data["records"] if r["engine"] == "jax"]
        runs.append((mine, jax_s[0] if jax_s else None, data.get("device", "one GPU")))
    fig, ax = plt.subplots(figsize=(5.6, 3.4))
    colors = plt.get_cmap("tab10").colors
    labels = []
    for i, (r, jax_s, _) in enumerate(runs):
        stages = r["stages_best_ms"]
        listed = sum(stages[key] for _, key in SUBSET_STAGES if key)
        bottom = 0.0
        for j, (label, key) in enumerate(SUBSET_STAGES):
            ms = stages[key] if key else stages["BandEigh"] - listed
            ax.bar(i, ms / 1e3, bottom=bottom, color=colors[j], label=label if i == 0 else None)
            bottom += ms / 1e3
        ax.annotate(f"{r['seconds']:.2f} s", (i, bottom), ha="center", va="bottom", fontsize=7)
        if jax_s is not None:
            ax.annotate(
                f"JAX full eigh, sliced: {jax_s:.1f} s",
                (i, bottom + 1.2),
                ha="center",
                va="bottom",
                fontsize=7,
                color=JAX,
            )
        k = r["n"] if r.get("lo") is None else r["hi"] - r["lo"]
        labels.append("all" if r.get("lo") is None else f"{k} lowest")
    ax.axhline(3.0, color=JAX, linestyle=":", label="target, k = N/10")
    ax.set_xticks(range(len(runs)), labels)
    ax.set_ylabel("seconds (best warm call)")
    n, device = runs[0][0]["n"], runs[0][2]
    ax.set_title(f"syevd, N = {n} float64, random: the two stages ({device})", fontsize=8)
    ax.set_ylim(0, 1.25 * max(r["seconds"] for r, _, _ in runs))
    ax.legend(frameon=False, fontsize=7, loc="upper left")
    return _save(fig, out / "eigenpairs_by_index_gpu.svg")


def draw_all(out: Path) -> list[Path]:
    """Draws every figure into `out`.

    Args:
        out: The folder to write to (created if missing).

    Returns:
        The files written.
    """
    plt = _setup()
    out.mkdir(parents=True, exist_ok=True)
    paths = [
        comparison(plt, out),
        potrs_scaling(plt, out),
        side_by_side(plt, out),
        tile_sweeps(plt, out),
        layout(plt, out, 2, 1),
        layout(plt, out, 2, 2),
        mixed_precision(plt, out),
        mixed_precision_gpu(plt, out),
        eigenpairs_by_index(plt, out),
        eigenpairs_by_index_gpu(plt, out),
    ]
    plt.close("all")
    return paths


def _svg_content(path: Path) -> str:
    """The SVG's text with matplotlib's generated element ids (clip paths, glyphs: a hash that
    can differ between processes drawing the same figure) replaced by their order of first use."""
    import re

    text = path.read_text()
    ids: dict[str, str] = {}
    return re.sub(
        r"\b([a-zA-Z]+)([0-9a-f]{10})\b",
        lambda m: m.group(1) + ids.setdefault(m.group(0), f"#{len(ids)}"),
        text,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=FIGURES, help="folder (default docs/figures)")
    p.add_argument(
        "--check", action="store_true", help="fail when a committed figure differs from its data"
    )
    args = p.parse_args(argv)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("bench/figures.py needs matplotlib: pip install matplotlib", file=sys.stderr)
        return 2
    if not args.check:
        for path in draw_all(args.out):
            print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        stale = [
            path.name
            for path in draw_all(Path(tmp))
            if not (args.out / path.name).is_file()
            or _svg_content(path) != _svg_content(args.out / path.name)
        ]
    if stale:
        print(f"stale figures (run python bench/figures.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    print("every figure matches its data")
    return 0


if __name__ == "__main__":
    sys.exit(main())
