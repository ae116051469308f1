"""The layout core (csrc/layout) against an independent NumPy model.

The core turns a JAX block sharding of an n x n matrix over a Pr x Pc mesh into the engines'
2-D block-cyclic layout (see csrc/layout/layout.h and DESIGN.md, "The data layout"):

* mesh position (u, v) holds the row-major shard A[u-block, v-block]; read column-major it is
  block (v, u) of Aᵀ, so the engine grid is grid_rows = Pc by grid_cols = Pr;
* when one of Pr, Pc divides the other the core *relabels*: the engine factors B = Π Apad Πᵀ
  (Apad = A cut into max(Pr, Pc) pieces per dimension, each padded with identity to a multiple
  of the tile T) whose block-cyclic local arrays are the JAX shards themselves, up to padding and
  a local tile permutation; otherwise the engine *redistributes* A into block-cyclic itself;
* general plans (kind GENERAL) relabel on every mesh with independent row and column
  permutations, B = Π_r Aᵀpad Π_cᵀ (pieces of n / lcm(Pr, Pc)), and FORCE_REDISTRIBUTE picks the
  redistribution on any mesh (to exercise that path).

Everything here is checked through the small C API (csrc/layout/layout_c_api.cc) loaded with
ctypes. Block-cyclic means tile T, source process 0: engine-local index `l` of grid coordinate
`c` on an axis of P processes is engine-global index ((l // T) * P + c) * T + l % T.
"""

from __future__ import annotations

import ctypes
import math
import re
from dataclasses import dataclass

import numpy as np
import pytest

import jaxmg._core.native as native

RELABEL, REDISTRIBUTE = 0, 1
SYMMETRIC, GENERAL, FORCE_REDISTRIBUTE = 0, 1, 2  # plan kinds (bits) of the C API
EPS = np.finfo(np.float64).eps
GUARD = 8  # extra elements after every output buffer, to catch writes past the end
GUARD_INT = -777
GUARD_F64 = -12345.678

MESHES = [(pr, pc) for pr in range(1, 5) for pc in range(1, 5)]
RELABEL_MESHES = [m for m in MESHES if max(m) % min(m) == 0]
REDISTRIBUTE_MESHES = [m for m in MESHES if max(m) % min(m) != 0]


def _ids(meshes):
    return [f"{pr}x{pc}" for pr, pc in meshes]


# ------------------------------------------------------------------------------------------------
# The native library.


@pytest.fixture(scope="module")
def lib() -> ctypes.CDLL:
    path = native.find_library("layout")
    if path is None:
        pytest.fail(
            "libjaxmg_layout_capi.so not found (searched: "
            f"{', '.join(map(str, native.library_dirs()))}); build it with "
            "`.venv/bin/pip install --no-build-isolation --no-deps .`"
        )
    cdll = ctypes.CDLL(str(path))
    i64, i32, ptr = ctypes.c_int64, ctypes.c_int, ctypes.c_void_p
    cdll.jaxmg_layout_plan.argtypes = [i64, i32, i32, i64, i32, i32, ptr, ctypes.c_char_p, i32]
    cdll.jaxmg_layout_plan.restype = i32
    head = [
        i64,
        i32,
        i32,
        i64,
        i32,
        i32,
        i32,
        i32,
    ]  # n, mesh_rows, mesh_cols, tile, pad, kind, u, v
    err = [ctypes.c_char_p, i32]
    cdll.jaxmg_layout_process.argtypes = head + [ptr] * 4 + err
    cdll.jaxmg_layout_process.restype = i32
    cdll.jaxmg_layout_prepare_local_f64.argtypes = head + [ptr] * 2 + err
    cdll.jaxmg_layout_prepare_local_f64.restype = i32
    return cdll


@dataclass(frozen=True)
class Plan:
    strategy: int
    padded_n: int
    grid_rows: int
    grid_cols: int
    padded: bool
    row_local_perm: bool
    col_local_perm: bool
    tiles: int


def c_plan(lib, n, pr, pc, tile, pad, err_len=1024, kind=SYMMETRIC) -> tuple[Plan | None, str]:
    """(plan, "") on success, (None, message) on failure."""
    info = np.full(8 + GUARD, GUARD_INT, dtype=np.int64)
    err = ctypes.create_string_buffer(err_len)
    rc = lib.jaxmg_layout_plan(n, pr, pc, tile, int(pad), kind, info.ctypes.data, err, err_len)
    assert np.all(info[8:] == GUARD_INT), "jaxmg_layout_plan wrote past info[7]"
    if rc != 0:
        return None, err.value.decode()
    return Plan(
        strategy=int(info[0]),
        padded_n=int(info[1]),
        grid_rows=int(info[2]),
        grid_cols=int(info[3]),
        padded=bool(info[4]),
        row_local_perm=bool(info[5]),
        col_local_perm=bool(info[6]),
        tiles=int(info[7]),
    ), ""


@dataclass(frozen=True)
class Process:
    u: int
    v: int
    grid: tuple[int, int]  # (engine grid row, engine grid col)
    extents: tuple[int, int]  # engine-local (rows, cols)
    row_map: np.ndarray  # engine-local row -> original global index, -1 = padding
    col_map: np.ndarray
    row_e: np.ndarray  # engine-local row -> engine-global row (block-cyclic model)
    col_e: np.ndarray


def c_process(lib, n, pr, pc, tile, pad, u, v, kind=SYMMETRIC) -> Process:
    grid = np.full(2 + GUARD, GUARD_INT, dtype=np.int32)
    ext = np.full(2 + GUARD, GUARD_INT, dtype=np.int64)
    err = ctypes.create_string_buffer(1024)
    args = (n, pr, pc, tile, int(pad), kind, u, v)
    rc = lib.jaxmg_layout_process(*args, grid.ctypes.data, ext.ctypes.data, None, None, err, 1024)
    assert rc == 0, f"jaxmg_layout_process{args} failed: {err.value.decode()}"
    rows, cols = int(ext[0]), int(ext[1])
    assert rows >= 0 and cols >= 0, f"negative extents {rows}x{cols} for {args}"
    row_map = np.full(rows + GUARD, GUARD_INT, dtype=np.int64)
    col_map = np.full(cols + GUARD, GUARD_INT, dtype=np.int64)
    maps = (row_map.ctypes.data, col_map.ctypes.data)
    rc = lib.jaxmg_layout_process(*args, grid.ctypes.data, ext.ctypes.data, *maps, err, 1024)
    assert rc == 0, f"jaxmg_layout_process{args} failed: {err.value.decode()}"
    assert np.all(grid[2:] == GUARD_INT) and np.all(ext[2:] == GUARD_INT), f"overrun for {args}"
    assert np.all(row_map[rows:] == GUARD_INT), f"row_map written past extents[0]={rows}: {args}"
    assert np.all(col_map[cols:] == GUARD_INT), f"col_map written past extents[1]={cols}: {args}"
    gr, gc = int(grid[0]), int(grid[1])
    assert 0 <= gr < pc and 0 <= gc < pr, f"grid {gr, gc} outside the {pc}x{pr} grid: {args}"
    return Process(
        u=u,
        v=v,
        grid=(gr, gc),
        extents=(rows, cols),
        row_map=row_map[:rows],
        col_map=col_map[:cols],
        row_e=engine_global(rows, tile, pc, gr),
        col_e=engine_global(cols, tile, pr, gc),
    )


def c_prepare(lib, n, pr, pc, tile, pad, u, v, shard, extents, kind=SYMMETRIC) -> np.ndarray:
    """Runs the local preparation on a row-major shard; returns `out` read column-major."""
    rows, cols = extents
    shard_before = shard.copy()
    out = np.full(rows * cols + GUARD, np.nan, dtype=np.float64)
    out[rows * cols :] = GUARD_F64
    err = ctypes.create_string_buffer(1024)
    args = (n, pr, pc, tile, int(pad), kind, u, v)
    rc = lib.jaxmg_layout_prepare_local_f64(*args, shard.ctypes.data, out.ctypes.data, err, 1024)
    assert rc == 0, f"jaxmg_layout_prepare_local_f64{args} failed: {err.value.decode()}"
    assert np.array_equal(shard, shard_before), f"the input shard was modified: {args}"
    assert np.all(out[rows * cols :] == GUARD_F64), f"out written past {rows}x{cols}: {args}"
    local = np.frombuffer(out[: rows * cols].tobytes(), dtype=np.float64)
    return local.reshape(cols, rows).T


# ------------------------------------------------------------------------------------------------
# The independent model.


def engine_global(extent: int, tile: int, procs: int, coord: int) -> np.ndarray:
    """Block-cyclic (tile T, source 0): engine-local index -> engine-global index."""
    local = np.arange(extent, dtype=np.int64)
    return ((local // tile) * procs + coord) * tile + local % tile


def needs_padding(n, pr, pc, tile) -> bool:
    """Relabel plans cut n into max(Pr, Pc) pieces; the tile must divide a piece."""
    return (n // max(pr, pc)) % tile != 0


def model_padded_n(n, pr, pc, tile) -> int:
    """Smallest multiple of tile * max(Pr, Pc) that is >= n (relabel plans)."""
    big = max(pr, pc)
    return math.ceil(n / (tile * big)) * tile * big


def padded_shard_identity(n, pr, pc, tile, procs, coord) -> np.ndarray:
    """Original index of each row of a JAX shard (coord-th of `procs` along one axis) once padded
    piece by piece (no tile permutation), -1 for padding."""
    big = max(pr, pc)
    se = n // big
    ps = model_padded_n(n, pr, pc, tile) // big
    local = np.arange(ps * big // procs, dtype=np.int64)
    within = local % ps
    out = coord * (n // procs) + (local // ps) * se + within
    out[within >= se] = -1
    return out


def case_list(pr, pc) -> list[tuple[int, int]]:
    """(n, tile) cases of one mesh: small n (lcm), tiles 1..4 that do and do not divide the shard,
    shard-sized tiles, and tiles larger than the shard (padding, relabel) or than n."""
    lcm = math.lcm(pr, pc)
    big = max(pr, pc)
    ns = sorted({lcm * m for m in (1, 2, 3, 4, 6)} | {lcm * math.ceil(30 / lcm)})
    cases = []
    for n in ns:
        se = n // big
        tiles = {1, 2, 3, 4, se, n // pr, n // pc, se + 1, 2 * se + 1, n, n + 1}
        cases += [(n, t) for t in sorted(tiles)]
    return cases


def expected_failure(n, pr, pc, tile, pad) -> bool | None:
    """True: must fail; False: must succeed; None: either (documented limitation)."""
    if max(pr, pc) % min(pr, pc) != 0:
        # Redistribution handles any tile; one larger than the whole matrix may be refused.
        return None if tile > n else False
    return needs_padding(n, pr, pc, tile) and not pad


def pad_for(n, pr, pc, tile) -> bool:
    """Padding is turned on only when needed, so the pad=False path is exercised too."""
    return max(pr, pc) % min(pr, pc) == 0 and needs_padding(n, pr, pc, tile)


def valid_cases(lib, pr, pc):
    for n, tile in case_list(pr, pc):
        pad = pad_for(n, pr, pc, tile)
        plan, _ = c_plan(lib, n, pr, pc, tile, pad)
        if plan is not None:
            yield n, tile, pad, plan


def all_processes(lib, n, pr, pc, tile, pad) -> list[Process]:
    return [c_process(lib, n, pr, pc, tile, pad, u, v) for u in range(pr) for v in range(pc)]


def engine_permutation(procs: list[Process], padded_n: int, axis: str) -> np.ndarray:
    """perm[E] = original index held at engine-global index E on `axis`, -1 for padding.

    Asserts that (grid coordinate, local index) -> E is a bijection onto [0, padded_n) and that
    processes sharing a grid coordinate hold the same indices."""
    perm = np.full(padded_n, -2, dtype=np.int64)
    by_coord = {}
    for p in procs:
        coord = p.grid[0] if axis == "row" else p.grid[1]
        m, e = (p.row_map, p.row_e) if axis == "row" else (p.col_map, p.col_e)
        if coord in by_coord:
            m0 = by_coord[coord]
            assert np.array_equal(m, m0), (
                f"{axis} map of mesh {(p.u, p.v)} differs from another process on {axis} {coord}"
            )
            continue
        by_coord[coord] = m
        assert len(e) == 0 or e.max() < padded_n, (
            f"{axis} {coord}: engine-global index {e.max()} >= padded_n {padded_n}"
        )
        assert np.all(perm[e] == -2), f"{axis} {coord}: engine-global indices held twice"
        perm[e] = m
    missing = np.flatnonzero(perm == -2)
    assert missing.size == 0, f"{axis}: engine-global indices held by no process: {missing[:10]}"
    return perm


def check_permutation(perm: np.ndarray, n: int, axis: str) -> None:
    real = perm[perm >= 0]
    assert np.all((perm >= 0) | (perm == -1)), f"{axis}: invalid entries {set(perm[perm < -1])}"
    assert np.array_equal(np.sort(real), np.arange(n)), (
        f"{axis}: original indices not covered exactly once "
        f"(missing {np.setdiff1d(np.arange(n), real)[:10]}, "
        f"{real.size - np.unique(real).size} duplicates)"
    )


def padded_order(n, pr, pc, tile, padded_n) -> np.ndarray:
    """Position of each original index in Apad (n cut into max(Pr, Pc) padded pieces)."""
    if padded_n == n:
        return np.arange(n)
    big = max(pr, pc)
    se, ps = n // big, padded_n // big
    idx = np.arange(n)
    return (idx // se) * ps + idx % se


def expected_local(a_t, p: Process) -> np.ndarray:
    """Engine-local array of process p for an engine matrix a_t (= Aᵀ of the JAX matrix)."""
    rm, cm = p.row_map, p.col_map
    out = np.zeros(p.extents)
    rr, cc = rm >= 0, cm >= 0
    out[np.ix_(rr, cc)] = a_t[np.ix_(rm[rr], cm[cc])]
    diag = (rm[:, None] == -1) & (cm[None, :] == -1) & (p.row_e[:, None] == p.col_e[None, :])
    out[diag] = 1.0
    return out


# ------------------------------------------------------------------------------------------------
# 1. Plans.


@pytest.mark.parametrize("pr,pc", MESHES, ids=_ids(MESHES))
def test_plan(lib, pr, pc):
    relabel = max(pr, pc) % min(pr, pc) == 0
    for n, tile in case_list(pr, pc):
        for pad in (False, True):
            where = f"n={n} mesh={pr}x{pc} tile={tile} pad={pad}"
            plan, msg = c_plan(lib, n, pr, pc, tile, pad)
            must_fail = expected_failure(n, pr, pc, tile, pad)
            if plan is None:
                assert must_fail is not False, f"{where}: unexpected failure: {msg}"
                assert re.search(rf"\btile {tile}\b", msg), (
                    f"{where}: the error message does not name the tile: {msg!r}"
                )
                continue
            assert must_fail is not True, f"{where}: should fail (tile does not divide the shard)"
            assert (plan.grid_rows, plan.grid_cols) == (pc, pr), (
                f"{where}: engine grid {plan.grid_rows}x{plan.grid_cols}, expected {pc}x{pr}"
            )
            if relabel:
                assert plan.strategy == RELABEL, f"{where}: strategy {plan.strategy}, want relabel"
                big = max(pr, pc)
                assert plan.padded_n % (tile * big) == 0, (
                    f"{where}: padded_n {plan.padded_n} not a multiple of tile*{big}"
                )
                assert plan.padded_n == model_padded_n(n, pr, pc, tile), (
                    f"{where}: padded_n {plan.padded_n}, model {model_padded_n(n, pr, pc, tile)}"
                )
                assert plan.padded == (plan.padded_n != n), f"{where}: padded flag {plan.padded}"
                assert plan.tiles == plan.padded_n // tile, f"{where}: {plan.tiles} tiles"
                if pr == pc:
                    assert not plan.row_local_perm and not plan.col_local_perm, (
                        f"{where}: a square grid needs no local permutation"
                    )
                else:
                    assert not (plan.row_local_perm and plan.col_local_perm), (
                        f"{where}: local permutation on both axes"
                    )
            else:
                assert plan.strategy == REDISTRIBUTE, (
                    f"{where}: strategy {plan.strategy}, want redistribute"
                )
                assert plan.padded_n == n and not plan.padded, f"{where}: {plan}"
                assert not plan.row_local_perm and not plan.col_local_perm, f"{where}: {plan}"
            if not pad:
                # With no padding needed, pad=True must plan exactly the same.
                assert c_plan(lib, n, pr, pc, tile, True)[0] == plan, (
                    f"{where}: pad=True changes a plan that needs no padding"
                )


@pytest.mark.parametrize(
    "n,pr,pc,tile,what",
    [
        (0, 1, 1, 1, "order"),
        (-4, 2, 2, 1, "order"),
        (6, 4, 1, 1, "divisible"),
        (6, 1, 4, 1, "divisible"),
        (10, 2, 3, 1, "divisible"),
        (8, 0, 2, 1, "mesh"),
        (8, 2, -1, 1, "mesh"),
        (8, 2, 2, 0, "tile"),
        (8, 2, 2, -3, "tile"),
    ],
)
def test_plan_rejects_invalid_arguments(lib, n, pr, pc, tile, what):
    for pad in (False, True):
        plan, msg = c_plan(lib, n, pr, pc, tile, pad)
        assert plan is None, f"n={n} mesh={pr}x{pc} tile={tile}: accepted, plan {plan}"
        assert what in msg, f"n={n} mesh={pr}x{pc} tile={tile}: message {msg!r} lacks {what!r}"


def test_error_message_is_truncated_to_the_buffer(lib):
    plan, msg = c_plan(lib, 6, 4, 1, 1, False, err_len=8)
    assert plan is None and len(msg) == 7, f"message {msg!r} not truncated to 7 characters"


# ------------------------------------------------------------------------------------------------
# 2. Index maps.


@pytest.mark.parametrize("pr,pc", MESHES, ids=_ids(MESHES))
def test_process_maps(lib, pr, pc):
    count = 0
    for n, tile, pad, plan in valid_cases(lib, pr, pc):
        count += 1
        where = f"n={n} mesh={pr}x{pc} tile={tile} pad={pad}"
        procs = all_processes(lib, n, pr, pc, tile, pad)
        grids = {p.grid: (p.u, p.v) for p in procs}
        assert len(grids) == pr * pc, f"{where}: grid positions not a bijection: {grids}"
        rows = engine_permutation(procs, plan.padded_n, "row")
        cols = engine_permutation(procs, plan.padded_n, "col")
        check_permutation(rows, n, f"{where} rows")
        check_permutation(cols, n, f"{where} cols")
        assert np.array_equal(rows, cols), (
            f"{where}: row and column permutations differ at E="
            f"{np.flatnonzero(rows != cols)[:10]} (not a symmetric permutation)"
        )
        for p in procs:
            at = f"{where} mesh ({p.u}, {p.v}) grid {p.grid}"
            if plan.strategy == REDISTRIBUTE:
                # Plain block-cyclic layout of A itself, mesh positions kept.
                assert p.grid == (p.v, p.u), f"{at}: redistribute keeps the mesh order"
                assert np.array_equal(p.row_map, p.row_e), f"{at}: row map is not the identity"
                assert np.array_equal(p.col_map, p.col_e), f"{at}: col map is not the identity"
                continue
            assert p.extents == (plan.padded_n // pc, plan.padded_n // pr), (
                f"{at}: extents {p.extents}, padded_n {plan.padded_n}"
            )
            # Nothing moves between devices: engine rows are the shard's columns (v-block),
            # engine columns the shard's rows (u-block).
            want_rows = np.arange(p.v * (n // pc), (p.v + 1) * (n // pc))
            want_cols = np.arange(p.u * (n // pr), (p.u + 1) * (n // pr))
            got_rows = np.sort(p.row_map[p.row_map >= 0])
            got_cols = np.sort(p.col_map[p.col_map >= 0])
            assert np.array_equal(got_rows, want_rows), (
                f"{at}: engine rows hold {got_rows}, the shard has columns {want_rows}"
            )
            assert np.array_equal(got_cols, want_cols), (
                f"{at}: engine cols hold {got_cols}, the shard has rows {want_cols}"
            )
            # What remains is padding plus (at most) a permutation of whole local tiles.
            for axis, m, local_perm, procs_axis, coord in (
                ("row", p.row_map, plan.row_local_perm, pc, p.v),
                ("col", p.col_map, plan.col_local_perm, pr, p.u),
            ):
                ident = padded_shard_identity(n, pr, pc, tile, procs_axis, coord)
                if not local_perm:
                    assert np.array_equal(m, ident), (
                        f"{at}: {axis} axis has no local permutation but its map is {m}, "
                        f"expected {ident}"
                    )
                else:
                    got = sorted(map(tuple, m.reshape(-1, tile)))
                    want = sorted(map(tuple, ident.reshape(-1, tile)))
                    assert got == want, f"{at}: {axis} map {m} is not a tile permutation of {ident}"
    assert count > 0


# ------------------------------------------------------------------------------------------------
# 3. Local preparation and the engine matrix.


def assemble(procs: list[Process], locals_: list[np.ndarray], padded_n: int) -> np.ndarray:
    b = np.full((padded_n, padded_n), np.nan)
    for p, local in zip(procs, locals_, strict=True):
        sub = b[np.ix_(p.row_e, p.col_e)]
        assert np.all(np.isnan(sub)), f"mesh ({p.u}, {p.v}) overlaps another process"
        b[np.ix_(p.row_e, p.col_e)] = local
    assert not np.any(np.isnan(b)), "engine matrix entries held by no process"
    return b


def check_prepare(lib, pr, pc, symmetric: bool) -> None:
    count = 0
    for n, tile, pad, plan in valid_cases(lib, pr, pc):
        count += 1
        where = f"n={n} mesh={pr}x{pc} tile={tile} pad={pad} padded_n={plan.padded_n}"
        rng = np.random.default_rng([pr, pc, n, tile, int(symmetric)])
        x = rng.standard_normal((n, n))
        a = x @ x.T + n * np.eye(n) if symmetric else x
        procs = all_processes(lib, n, pr, pc, tile, pad)
        locals_ = []
        for p in procs:
            rs, cs = n // pr, n // pc
            shard = np.ascontiguousarray(a[p.u * rs : (p.u + 1) * rs, p.v * cs : (p.v + 1) * cs])
            local = c_prepare(lib, n, pr, pc, tile, pad, p.u, p.v, shard, p.extents)
            # The shard is read column-major: the engine sees Aᵀ (= A when symmetric).
            want = expected_local(a.T, p)
            bad = np.argwhere(local != want)
            assert bad.size == 0, (
                f"{where} mesh ({p.u}, {p.v}): {len(bad)} wrong local entries, first "
                f"{[(tuple(ij), local[tuple(ij)], want[tuple(ij)]) for ij in bad[:5]]}; "
                f"row_map {p.row_map}, col_map {p.col_map}"
            )
            locals_.append(local)
        b = assemble(procs, locals_, plan.padded_n)
        perm = engine_permutation(procs, plan.padded_n, "row")
        # B = Π Apadᵀ Πᵀ, Apad = Aᵀ with every piece padded with identity.
        pos = padded_order(n, pr, pc, tile, plan.padded_n)
        a_pad = np.eye(plan.padded_n)
        a_pad[np.ix_(pos, pos)] = a.T
        pi = np.empty(plan.padded_n, dtype=np.int64)
        pi[perm >= 0] = pos[perm[perm >= 0]]
        pi[perm < 0] = np.setdiff1d(np.arange(plan.padded_n), pos)
        assert np.array_equal(b, a_pad[np.ix_(pi, pi)]), (
            f"{where}: engine matrix is not the symmetric permutation of the padded matrix"
        )
        if not symmetric:
            continue
        assert np.array_equal(b, b.T), f"{where}: engine matrix is not symmetric"
        chol = np.linalg.cholesky(b)
        logdet_b = 2.0 * np.log(np.diag(chol)).sum()
        sign, logdet_a = np.linalg.slogdet(a)
        assert sign == 1.0
        assert np.isclose(logdet_b, logdet_a, rtol=0, atol=100 * n * EPS * abs(logdet_a)), (
            f"{where}: log det B = {logdet_b}, log det A = {logdet_a}"
        )
        rhs = rng.standard_normal((n, 3))
        pb = np.zeros((plan.padded_n, 3))
        pb[perm >= 0] = rhs[perm[perm >= 0]]
        y = np.linalg.solve(b, pb)
        sol = np.empty_like(rhs)
        sol[perm[perm >= 0]] = y[perm >= 0]
        ref = np.linalg.solve(a, rhs)
        cond = np.linalg.cond(a)
        err = np.linalg.norm(sol - ref) / np.linalg.norm(ref)
        assert err <= 10 * plan.padded_n * EPS * cond, (
            f"{where}: relative solve error {err:.3e} (cond {cond:.2f})"
        )
        assert np.linalg.norm(y[perm < 0]) <= 10 * plan.padded_n * EPS * np.linalg.norm(y), (
            f"{where}: the solution is not zero on padding"
        )
    assert count > 0


@pytest.mark.parametrize("pr,pc", RELABEL_MESHES, ids=_ids(RELABEL_MESHES))
def test_prepare_local_spd(lib, pr, pc):
    check_prepare(lib, pr, pc, symmetric=True)


@pytest.mark.parametrize("pr,pc", RELABEL_MESHES, ids=_ids(RELABEL_MESHES))
def test_prepare_local_general(lib, pr, pc):
    check_prepare(lib, pr, pc, symmetric=False)


@pytest.mark.parametrize("pr,pc", REDISTRIBUTE_MESHES, ids=_ids(REDISTRIBUTE_MESHES))
def test_prepare_local_rejects_redistribute(lib, pr, pc):
    n = math.lcm(pr, pc)
    shard = np.zeros((n // pr, n // pc))
    out = np.zeros(n * n)
    err = ctypes.create_string_buffer(1024)
    rc = lib.jaxmg_layout_prepare_local_f64(
        n, pr, pc, 1, 1, SYMMETRIC, 0, 0, shard.ctypes.data, out.ctypes.data, err, 1024
    )
    assert rc != 0, f"mesh {pr}x{pc}: local preparation accepted a redistribute plan"
    assert "relabel" in err.value.decode(), f"unexpected message {err.value.decode()!r}"


# ------------------------------------------------------------------------------------------------
# 4. General plans (independent row and column relabelings, every mesh).
#
# The engine matrix is Aᵀ: engine rows run along the JAX columns over Pc processes (grid
# coordinate v), engine columns along the JAX rows over Pr processes (grid coordinate u), with the
# mesh order kept on both axes. Each axis is cut into L = lcm(Pr, Pc) pieces of n / L, each padded
# to a multiple of T (the same pieces on both axes, so padded rows and columns coincide and the
# padded diagonal is the identity). With K = padded n / T, engine tile I on an axis of P processes
# holds padded (mesh-ordered) tile (I mod P) * (K / P) + I div P.


@dataclass(frozen=True)
class GeneralModel:
    n: int
    tile: int
    lcm: int
    piece: int  # n / L
    padded_piece: int  # piece rounded up to a multiple of T
    padded_n: int

    @classmethod
    def of(cls, n, pr, pc, tile) -> GeneralModel:
        lcm = math.lcm(pr, pc)
        piece = n // lcm
        padded_piece = math.ceil(piece / tile) * tile
        return cls(n, tile, lcm, piece, padded_piece, lcm * padded_piece)

    @property
    def padded(self) -> bool:
        return self.padded_piece != self.piece

    def padded_of_original(self) -> np.ndarray:
        """Position of each original index on the padded, mesh-ordered axis."""
        idx = np.arange(self.n, dtype=np.int64)
        return (idx // self.piece) * self.padded_piece + idx % self.piece

    def original_of_padded(self) -> np.ndarray:
        """Original index of each padded index, -1 for padding."""
        idx = np.arange(self.padded_n, dtype=np.int64)
        within = idx % self.padded_piece
        out = (idx // self.padded_piece) * self.piece + within
        out[within >= self.piece] = -1
        return out

    def padded_of_engine(self, procs: int) -> np.ndarray:
        """Padded index held at each engine-global index of an axis of `procs` processes."""
        t = self.tile
        k = self.padded_n // t
        e = np.arange(self.padded_n, dtype=np.int64)
        tiles = e // t
        return ((tiles % procs) * (k // procs) + tiles // procs) * t + e % t

    def padded_local(self, procs: int, coord: int) -> np.ndarray:
        """Padded index of each engine-local index of grid coordinate `coord`."""
        local_n = self.padded_n // procs
        return self.padded_of_engine(procs)[engine_global(local_n, self.tile, procs, coord)]

    def local_map(self, procs: int, coord: int) -> np.ndarray:
        """Original index (or -1) of each engine-local index of grid coordinate `coord`."""
        return self.original_of_padded()[self.padded_local(procs, coord)]


def general_case_list(pr, pc) -> list[tuple[int, int]]:
    """(n, tile) cases for general plans: the pieces are n / lcm(Pr, Pc). Tiles that divide the
    piece, that do not (padding), the piece, the shards, larger than the piece, and than n."""
    lcm = math.lcm(pr, pc)
    ns = sorted({lcm * m for m in (1, 2, 3, 5)} | {lcm * math.ceil(24 / lcm)})
    cases = []
    for n in ns:
        piece = n // lcm
        tiles = {1, 2, 3, 4, piece, n // pr, n // pc, piece + 1, 2 * piece + 1, n + 1}
        cases += [(n, t) for t in sorted(tiles)]
    return cases


def general_valid_cases(pr, pc):
    """(n, tile, pad, model): padding is turned on only where the model needs it."""
    for n, tile in general_case_list(pr, pc):
        model = GeneralModel.of(n, pr, pc, tile)
        yield n, tile, model.padded, model


@pytest.mark.parametrize("pr,pc", MESHES, ids=_ids(MESHES))
def test_general_plan(lib, pr, pc):
    for n, tile, _, model in general_valid_cases(pr, pc):
        for pad in (False, True):
            where = f"general n={n} mesh={pr}x{pc} tile={tile} pad={pad}"
            plan, msg = c_plan(lib, n, pr, pc, tile, pad, kind=GENERAL)
            if model.padded and not pad:
                assert plan is None, f"{where}: accepted though T does not divide n/lcm: {plan}"
                continue
            assert plan is not None, f"{where}: unexpected failure: {msg}"
            assert plan.strategy == RELABEL, f"{where}: strategy {plan.strategy}, want relabel"
            assert (plan.grid_rows, plan.grid_cols) == (pc, pr), (
                f"{where}: engine grid {plan.grid_rows}x{plan.grid_cols}, expected {pc}x{pr}"
            )
            assert not plan.row_local_perm and not plan.col_local_perm, (
                f"{where}: general plans need no local tile permutation: {plan}"
            )
            assert plan.padded_n == model.padded_n, (
                f"{where}: padded_n {plan.padded_n}, model {model.padded_n}"
            )
            assert plan.padded == model.padded, f"{where}: padded flag {plan.padded}"
            assert plan.tiles == model.padded_n // tile, f"{where}: {plan.tiles} tiles"
            if not model.padded:
                assert c_plan(lib, n, pr, pc, tile, True, kind=GENERAL)[0] == plan, (
                    f"{where}: pad=True changes a plan that needs no padding"
                )


@pytest.mark.parametrize("pr,pc", MESHES, ids=_ids(MESHES))
def test_general_process_maps(lib, pr, pc):
    count = 0
    for n, tile, pad, model in general_valid_cases(pr, pc):
        count += 1
        where = f"general n={n} mesh={pr}x{pc} tile={tile} pad={pad}"
        procs = [
            c_process(lib, n, pr, pc, tile, pad, u, v, kind=GENERAL)
            for u in range(pr)
            for v in range(pc)
        ]
        for p in procs:
            at = f"{where} mesh ({p.u}, {p.v}) grid {p.grid}"
            # Identity mesh -> grid maps: mesh (u, v) is engine grid (v, u).
            assert p.grid == (p.v, p.u), f"{at}: expected grid {(p.v, p.u)}"
            assert p.extents == (model.padded_n // pc, model.padded_n // pr), (
                f"{at}: extents {p.extents}, padded_n {model.padded_n}"
            )
            want_rows = model.local_map(pc, p.v)
            want_cols = model.local_map(pr, p.u)
            assert np.array_equal(p.row_map, want_rows), (
                f"{at}: row map {p.row_map}, model {want_rows}"
            )
            assert np.array_equal(p.col_map, want_cols), (
                f"{at}: col map {p.col_map}, model {want_cols}"
            )
            # Nothing moves between devices: engine rows are the shard's columns (v-block),
            # engine columns the shard's rows (u-block).
            assert np.array_equal(
                np.sort(p.row_map[p.row_map >= 0]),
                np.arange(p.v * (n // pc), (p.v + 1) * (n // pc)),
            ), f"{at}: engine rows {p.row_map} are not the shard's columns"
            assert np.array_equal(
                np.sort(p.col_map[p.col_map >= 0]),
                np.arange(p.u * (n // pr), (p.u + 1) * (n // pr)),
            ), f"{at}: engine cols {p.col_map} are not the shard's rows"
        # Together the processes hold every engine-global index once, and every original index
        # once per axis (padding aside).
        rows = engine_permutation(procs, model.padded_n, "row")
        cols = engine_permutation(procs, model.padded_n, "col")
        check_permutation(rows, n, f"{where} rows")
        check_permutation(cols, n, f"{where} cols")
        orig = model.original_of_padded()
        assert np.array_equal(rows, orig[model.padded_of_engine(pc)]), f"{where}: row order"
        assert np.array_equal(cols, orig[model.padded_of_engine(pr)]), f"{where}: col order"
    assert count > 0


@pytest.mark.parametrize("pr,pc", MESHES, ids=_ids(MESHES))
def test_general_prepare_local(lib, pr, pc):
    count = 0
    for n, tile, pad, model in general_valid_cases(pr, pc):
        count += 1
        where = f"general n={n} mesh={pr}x{pc} tile={tile} pad={pad} padded_n={model.padded_n}"
        rng = np.random.default_rng([pr, pc, n, tile, 7])
        a = rng.standard_normal((n, n))
        assert n == 1 or not np.allclose(a, a.T)
        # The model engine matrix: Π_r Aᵀpad Π_cᵀ, Aᵀpad = Aᵀ with identity on the padded diagonal.
        pos = model.padded_of_original()
        at_pad = np.eye(model.padded_n)
        at_pad[np.ix_(pos, pos)] = a.T
        src_r, src_c = model.padded_of_engine(pc), model.padded_of_engine(pr)
        want_b = at_pad[np.ix_(src_r, src_c)]
        procs = [
            c_process(lib, n, pr, pc, tile, pad, u, v, kind=GENERAL)
            for u in range(pr)
            for v in range(pc)
        ]
        locals_ = []
        rs, cs = n // pr, n // pc
        for p in procs:
            shard = np.ascontiguousarray(a[p.u * rs : (p.u + 1) * rs, p.v * cs : (p.v + 1) * cs])
            local = c_prepare(lib, n, pr, pc, tile, pad, p.u, p.v, shard, p.extents, kind=GENERAL)
            want = want_b[np.ix_(p.row_e, p.col_e)]
            bad = np.argwhere(local != want)
            assert bad.size == 0, (
                f"{where} mesh ({p.u}, {p.v}): {len(bad)} wrong local entries, first "
                f"{[(tuple(ij), local[tuple(ij)], want[tuple(ij)]) for ij in bad[:5]]}; "
                f"row_map {p.row_map}, col_map {p.col_map}"
            )
            locals_.append(local)
        b = assemble(procs, locals_, model.padded_n)
        assert np.array_equal(b, want_b), f"{where}: engine matrix is not Π_r Aᵀpad Π_cᵀ"
        # The same through the C maps: B[i, j] = A[col_orig(j), row_orig(i)] (the engine sees
        # Aᵀ); padding is 1 where padded row == padded column, 0 elsewhere.
        rows = engine_permutation(procs, model.padded_n, "row")
        cols = engine_permutation(procs, model.padded_n, "col")
        rr, cc = rows >= 0, cols >= 0
        assert np.array_equal(b[np.ix_(rr, cc)], a[cols[cc][None, :], rows[rr][:, None]]), (
            f"{where}: engine entries are not A[col_orig(j), row_orig(i)]"
        )
        pad_block = b[np.ix_(~rr, ~cc)]
        same = src_r[~rr][:, None] == src_c[~cc][None, :]
        assert np.array_equal(pad_block, same.astype(float)), (
            f"{where}: padding block is not the identity of the padded diagonal"
        )
        assert not b[np.ix_(rr, ~cc)].any() and not b[np.ix_(~rr, cc)].any(), (
            f"{where}: nonzero entries mixing real and padding indices"
        )
    assert count > 0


def general_rejections(lib, pr, pc, larger: bool):
    """(where, message) of general plans with pad=False and a tile that does not divide the
    piece n / lcm(Pr, Pc): tiles smaller than the piece, or (larger=True) larger than it."""
    for n, tile in general_case_list(pr, pc):
        piece = n // math.lcm(pr, pc)
        if piece % tile == 0 or (tile > piece) != larger:
            continue
        plan, msg = c_plan(lib, n, pr, pc, tile, False, kind=GENERAL)
        where = f"general n={n} mesh={pr}x{pc} tile={tile} (piece {piece}) pad=False"
        assert plan is None, f"{where}: accepted though T does not divide n/lcm: {plan}"
        assert re.search(rf"\btile {tile}\b", msg), f"{where}: message {msg!r} lacks the tile"
        yield where, msg


@pytest.mark.parametrize("pr,pc", MESHES, ids=_ids(MESHES))
def test_general_plan_rejects_tile_without_padding(lib, pr, pc):
    count = 0
    for where, msg in general_rejections(lib, pr, pc, larger=False):
        count += 1
        assert "padding" in msg, f"{where}: the message does not say padding is needed: {msg!r}"
    # Tiles larger than the piece are refused too (the message is checked below).
    count += len(list(general_rejections(lib, pr, pc, larger=True)))
    assert count > 0


LARGE_TILE_MESHES = [(1, 1), (2, 3), (4, 4)]


@pytest.mark.parametrize("pr,pc", LARGE_TILE_MESHES, ids=_ids(LARGE_TILE_MESHES))
def test_general_plan_rejects_tile_larger_than_piece_says_padding(lib, pr, pc):
    for where, msg in general_rejections(lib, pr, pc, larger=True):
        assert "padding" in msg, f"{where}: the message does not say padding is needed: {msg!r}"


# ------------------------------------------------------------------------------------------------
# 5. Forced redistribution: the engine lays out the unpadded matrix block-cyclically itself.


def numroc(n: int, tile: int, coord: int, procs: int) -> int:
    """Independent count of the indices of [0, n) in block-cyclic tiles owned by `coord`."""
    return int(np.count_nonzero((np.arange(n) // tile) % procs == coord))


FORCED_KINDS = [FORCE_REDISTRIBUTE, GENERAL | FORCE_REDISTRIBUTE]


@pytest.mark.parametrize("kind", FORCED_KINDS, ids=["symmetric", "general"])
@pytest.mark.parametrize("pr,pc", RELABEL_MESHES, ids=_ids(RELABEL_MESHES))
def test_forced_redistribution(lib, pr, pc, kind):
    count = 0
    for n, tile in case_list(pr, pc):
        for pad in (False, True):
            where = f"kind={kind} n={n} mesh={pr}x{pc} tile={tile} pad={pad}"
            plan, msg = c_plan(lib, n, pr, pc, tile, pad, kind=kind)
            if tile > n:
                # A tile larger than the matrix may be refused, naming the tile.
                if plan is None:
                    assert re.search(rf"\btile {tile}\b", msg), f"{where}: message {msg!r}"
                    continue
            assert plan is not None, f"{where}: unexpected failure: {msg}"
            count += 1
            assert plan.strategy == REDISTRIBUTE, f"{where}: strategy {plan.strategy}"
            assert (plan.grid_rows, plan.grid_cols) == (pc, pr), f"{where}: {plan}"
            assert plan.padded_n == n and not plan.padded, f"{where}: padded {plan}"
            assert not plan.row_local_perm and not plan.col_local_perm, f"{where}: {plan}"
            assert plan.tiles == math.ceil(n / tile), f"{where}: {plan.tiles} tiles"
            procs = [
                c_process(lib, n, pr, pc, tile, pad, u, v, kind=kind)
                for u in range(pr)
                for v in range(pc)
            ]
            for p in procs:
                at = f"{where} mesh ({p.u}, {p.v}) grid {p.grid}"
                assert p.grid == (p.v, p.u), f"{at}: redistribute keeps the mesh order"
                assert p.extents == (numroc(n, tile, p.v, pc), numroc(n, tile, p.u, pr)), (
                    f"{at}: extents {p.extents} are not numroc"
                )
                assert np.array_equal(p.row_map, p.row_e), f"{at}: row map is not the identity"
                assert np.array_equal(p.col_map, p.col_e), f"{at}: col map is not the identity"
            check_permutation(engine_permutation(procs, n, "row"), n, f"{where} rows")
            check_permutation(engine_permutation(procs, n, "col"), n, f"{where} cols")
            if pad:
                continue
            shard = np.zeros((n // pr, n // pc))
            out = np.zeros(n * n)
            err = ctypes.create_string_buffer(1024)
            rc = lib.jaxmg_layout_prepare_local_f64(
                n, pr, pc, tile, 0, kind, 0, 0, shard.ctypes.data, out.ctypes.data, err, 1024
            )
            assert rc != 0 and "relabel" in err.value.decode(), (
                f"{where}: local preparation of a redistribute plan: {err.value.decode()!r}"
            )
    assert count > 0


# The GPU engine's redistribution (Remap) from its index lists, run here for every process of
# a grid at once: the part that stays moves locally; what goes to process (qr, qc) is packed
# as rows.send[qr] x cols.send[qc] (column-major), and the receiver unpacks it at
# rows.recv[pr] x cols.recv[pc]. The result must be the target distribution of the matrix.


def axis_exchange(lib, n, bf, bt, procs, me):
    i64p = ctypes.POINTER(ctypes.c_int64)
    lib.jaxmg_layout_axis_exchange.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_int] * 2 + [i64p] * 2
    lib.jaxmg_layout_axis_exchange.restype = ctypes.c_int
    counts = np.zeros(2 * procs, dtype=np.int64)
    assert (
        lib.jaxmg_layout_axis_exchange(n, bf, bt, procs, me, counts.ctypes.data_as(i64p), None) == 0
    )
    lists = np.full(int(counts.sum()) + GUARD, GUARD_INT, dtype=np.int64)
    rc = lib.jaxmg_layout_axis_exchange(
        n, bf, bt, procs, me, counts.ctypes.data_as(i64p), lists.ctypes.data_as(i64p)
    )
    assert rc == 0 and np.all(lists[int(counts.sum()) :] == GUARD_INT)
    parts = np.split(lists[: int(counts.sum())], np.cumsum(counts)[:-1])
    return parts[:procs], parts[procs:]


def local_part(x, rb, cb, pr, pc, r, c):
    """Process (r, c)'s local array of x, block-cyclic with blocks rb x cb over a pr x pc grid."""
    rows = [g for g in range(x.shape[0]) if (g // rb) % pr == r]
    cols = [g for g in range(x.shape[1]) if (g // cb) % pc == c]
    return x[np.ix_(rows, cols)]


REMAP_CASES = [
    # (m, n, grid, blocks before, blocks after): the block layout into tiles and back, tiles
    # into other tiles, tiles that do not divide, empty local parts.
    (12, 12, (2, 1), (6, 12), (4, 4)),
    (12, 12, (1, 2), (12, 6), (5, 5)),
    (24, 18, (2, 2), (12, 9), (5, 4)),
    (24, 18, (2, 2), (5, 4), (12, 9)),
    (18, 12, (3, 2), (6, 6), (7, 3)),
    (16, 16, (4, 1), (3, 3), (4, 4)),
    (16, 16, (1, 4), (16, 4), (256, 256)),
    (9, 7, (2, 3), (2, 3), (1, 1)),
]


@pytest.mark.parametrize("m,n,grid,before,after", REMAP_CASES)
def test_remap_lists_move_every_entry_to_its_target(lib, m, n, grid, before, after):
    p, q = grid
    x = np.arange(m * n, dtype=np.float64).reshape(m, n) + 1.0
    rows = [axis_exchange(lib, m, before[0], after[0], p, r) for r in range(p)]
    cols = [axis_exchange(lib, n, before[1], after[1], q, c) for c in range(q)]
    src = {(r, c): local_part(x, *before, p, q, r, c) for r in range(p) for c in range(q)}
    dst = {
        (r, c): np.full(local_part(x, *after, p, q, r, c).shape, np.nan)
        for r in range(p)
        for c in range(q)
    }
    for (r, c), a in src.items():
        rsend, _ = rows[r]
        csend, _ = cols[c]
        for qr in range(p):
            for qc in range(q):
                packed = a[np.ix_(rsend[qr], csend[qc])].reshape(-1, order="F")
                _, rrecv = rows[qr]
                _, crecv = cols[qc]
                nr, nc = len(rrecv[r]), len(crecv[c])
                assert packed.size == nr * nc, f"{(r, c)} -> {(qr, qc)}: sizes disagree"
                dst[(qr, qc)][np.ix_(rrecv[r], crecv[c])] = packed.reshape(nr, nc, order="F")
    for (r, c), d in dst.items():
        want = local_part(x, *after, p, q, r, c)
        assert np.array_equal(d, want), f"process {(r, c)}: wrong entries after the remap"


@pytest.mark.parametrize("pr,pc", MESHES, ids=_ids(MESHES))
def test_python_asks_the_layout_core(lib, pr, pc):
    """jaxmg._core.native.layout_plan (what routine.py's planning reads) is the C plan: symmetric
    routines relabel where one mesh side divides the other, general ones everywhere, forced
    redistribution never; the engine's order is the padded one."""
    from jaxmg._core import native

    pieces = math.lcm(pr, pc)
    n, tile = 6 * pieces, 4  # a piece of 6 rows pads to 8 with tile 4
    for symmetric, redistribute in ((True, False), (False, False), (True, True), (False, True)):
        relabels, order = native.layout_plan(n, pr, pc, tile, True, symmetric, redistribute)
        kind = (0 if symmetric else GENERAL) | (FORCE_REDISTRIBUTE if redistribute else 0)
        plan, msg = c_plan(lib, n, pr, pc, tile, True, kind=kind)
        assert plan is not None, msg
        assert relabels == (plan.strategy == RELABEL), (symmetric, redistribute)
        want = not redistribute and (not symmetric or max(pr, pc) % min(pr, pc) == 0)
        assert relabels == want, (symmetric, redistribute)
        assert order == (8 * pieces if relabels else n), (symmetric, redistribute, order)
