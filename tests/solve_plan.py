"""The cases the solve workers run, by name: pure data, shared by the workers and the tests.

A worker runs every case of its plan and records each under the plan's name (also when the case
raises); the test asserts that the records are exactly the plan, so no case can be lost, renamed
or silently skipped.
"""

from __future__ import annotations

import math
import re

DTYPE_NAMES = ("float32", "float64", "complex64", "complex128")
ROUTINES = ("potrs", "lu_solve")
GRAD_MESHES = ((1, 1), (1, 2), (2, 2))  # the meshes of solve_triangular's derivative case
# The meshes of the 1000 repeated calls (memory stays flat): one process, and a 2-D grid
# (tests/test_reliability.py repeats 1000 calls of every family on 2 processes).
MEMORY_MESHES = ((1, 1), (2, 2))


def solve_name(routine, dtype_name, n, tile, k, path="default", pad=True):
    name = f"{routine}/{dtype_name}/n{n}/T{tile}/k{k}"
    if path != "default":
        name += f"/{path}"
    if not pad:
        name += "/nopad"
    return name


def _solve_entry(routine, dtype_name, n, tile, k, path="default", pad=True):
    params = dict(routine=routine, dtype_name=dtype_name, n=n, tile=tile, k=k, path=path, pad=pad)
    return solve_name(routine, dtype_name, n, tile, k, path, pad), "solve", params


def order_for(mesh_rows: int, mesh_cols: int) -> int:
    """A small matrix order every routine accepts on the mesh (a multiple of both sides)."""
    big, small = max(mesh_rows, mesh_cols), min(mesh_rows, mesh_cols)
    return 48 if big % small == 0 else 60


# A case of a routine's dtype x tile grid: routine/dtype/shape/T<tile>, perhaps with its number of
# right-hand sides, values-only or a product's operations.
_GRID_CASE = re.compile(
    r"^[^/]+/(float32|float64|complex64|complex128)/[^/]+/T([^/]+)(/k\d+|/values|/nn|/cn|/nc)?$"
)


def mesh_dependent(name: str) -> bool:
    """On meshes of more than two processes, the cases that depend on the mesh: of each routine's
    dtype x tile grid, float64 in every tile (automatic, dividing, padding, one per piece) and
    complex128 in the padding tile; every engine path, variant and failure. The dtypes are the
    same local calls on every mesh, and the full grid runs on 1x1, 2x1 and 1x2."""
    m = _GRID_CASE.match(name)
    if m is None:
        return True
    dtype_name, tile = m.group(1), m.group(2)
    return dtype_name == "float64" or (dtype_name == "complex128" and tile == "5")


# The order of a case's matrix: n<order>, or <rows>x<cols> (the larger side).
_ORDER = re.compile(r"/n(\d+)/|/(\d+)x(\d+)/")


# The variants that are the same local computation on every grid of a rank count: with ranks
# sharing one GPU they run on the first mesh of 2 and of 4 ranks (shared_gpu_case's variants).
MESH_FREE_VARIANTS = frozenset(
    (
        "donate",
        "degenerate",
        "clustered",
        "values-degenerate",
        "values-clustered",
        "rank-deficient",
        "values-rank-deficient",
        "ill-conditioned",
        "u",
        "vh",
        "up",
        "chunked",
        "blocked",
        "nopad",
        "vmap",
        "grad",
    )
)


def _within(name: str, largest: int | None) -> bool:
    order = _ORDER.search(name)
    return largest is None or order is None or max(int(g) for g in order.groups() if g) <= largest


# The meshes of each rank count with ranks sharing one GPU: 1 x P, P x 1 and the 2-D grids.
SHARED_MESHES = {2: ((2, 1), (1, 2)), 4: ((4, 1), (1, 4), (2, 2)), 6: ((3, 2),)}
# Each dtype's tile with ranks sharing one GPU, beside float64's every tile (padding for float32
# and complex128, dividing for complex64).
_SHARED_TILE = {"float32": "5", "complex64": "8", "complex128": "5"}


def shared_pick(shape: tuple[int, int], twostage: bool = False):
    """The cases of gpu_plan(*shape) that run with ranks sharing one GPU (slow: NCCL over
    loopback sockets, the GPU time-sliced among the processes), as a predicate on names.

    Of each routine's dtype x tile grid: float64 in every tile and each other dtype in one
    (_SHARED_TILE, else its first), with at least one tile that divides the pieces and one
    that pads. Every engine path, inside jit, and every failure. The variants that are the same
    local computation on every grid (MESH_FREE_VARIANTS) and the orders above 64 only on the
    first mesh of 2 and of 4 ranks; the two-stage eigensolver's stage (`twostage`) keeps every
    order and variant (its larger orders are there for the bands)."""
    count = shape[0] * shape[1]
    first = twostage or (shape == SHARED_MESHES[count][0] and count <= 4)
    largest = None if twostage else 400 if first else 64
    n = 64 if 64 % math.lcm(*shape) == 0 else 48
    piece = n // math.lcm(*shape)
    keep, grids = set(), {}
    for name, _, _ in gpu_plan(*shape):
        if not _within(name, largest):
            continue
        m = _GRID_CASE.match(name)
        if m is None:
            if first or name.rsplit("/", 1)[-1] not in MESH_FREE_VARIANTS:
                keep.add(name)
            continue
        dtype_name, tile = m.group(1), m.group(2)
        grids.setdefault(name.split("/")[0], []).append((name, dtype_name, tile))
        if dtype_name == "float64" or tile == _SHARED_TILE[dtype_name]:
            keep.add(name)
    for cases in grids.values():
        for dtype_name in DTYPE_NAMES:  # every dtype, in its first tile where not its own
            if not any(d == dtype_name and c in keep for c, d, _ in cases):
                keep.add(next(c for c, d, _ in cases if d == dtype_name))
        for divides in (True, False):  # a tile that divides the pieces, and one that pads
            kind = [c for c, _, t in cases if t.isdigit() and (piece % int(t) == 0) == divides]
            if kind and not keep.intersection(kind):
                keep.add(kind[0])
    return keep.__contains__


def cpu_plan(mesh_rows: int, mesh_cols: int) -> list[tuple[str, str, dict]]:
    """[(case name, kind, parameters)] for the CPU engine on one mesh (with more than two
    processes, its cases that depend on the mesh: mesh_dependent)."""
    plan = _full_cpu_plan(mesh_rows, mesh_cols)
    if mesh_rows * mesh_cols > 2:
        plan = [case for case in plan if mesh_dependent(case[0])]
    return plan


def _full_cpu_plan(mesh_rows: int, mesh_cols: int) -> list[tuple[str, str, dict]]:
    n = order_for(mesh_rows, mesh_cols)
    piece = n // math.lcm(mesh_rows, mesh_cols)
    plan = []

    def solve(*args, **kwargs):
        plan.append(_solve_entry(*args, **kwargs))

    for routine in ROUTINES:
        # Tiles: automatic, 4 (divides the pieces), 5 (padding), one tile per piece.
        for dtype_name in DTYPE_NAMES:
            for tile in dict.fromkeys((None, 4, 5, piece)):
                solve(routine, dtype_name, n, tile, 3)
        solve(routine, "float64", n, 4, 0)  # vector b
        solve(routine, "complex128", n, 7, 1)
        solve(routine, "float64", 2 * n, 3, 5)
        solve(routine, "float64", n, 2, 3, pad=False)
        solve(routine, "complex128", n, 4, 3, path="transposed")
        solve(routine, "complex128", n, 5, 3, path="redistribute")
        solve(routine, "float32", n, 4, 2, path="inplace")
        if routine == "lu_solve":  # p?getrf, where the 1-D LU is the default (1 x P grids)
            solve(routine, "float64", n, 4, 3, path="scalapack")
            solve(routine, "complex128", n, 5, 2, path="scalapack")
        elif 1 in (mesh_rows, mesh_cols):  # the 1-D Cholesky (1 x P engine grids)
            solve(routine, "float64", n, 4, 3, path="blocked")
            solve(routine, "complex128", n, 5, 2, path="blocked")
            solve(routine, "float32", n, 7, 1, path="blocked")
            plan.append(
                ("potrs/singular/blocked", "singular", dict(routine=routine, n=n, path="blocked"))
            )
        for kind in (
            "replicated-b",
            "permuted-devices",
            "inside-jit",
            "donate",
            "singular",
            "nan-input",
            "no-matrix-collective",
        ):
            plan.append((f"{routine}/{kind}", kind, dict(routine=routine, n=n)))
    plan.append(("potrs/not-symmetric", "not-symmetric", dict(routine="potrs", n=n)))
    if (mesh_rows, mesh_cols) in MEMORY_MESHES:
        plan.append(("mixed-repeated", "repeated", dict(n=n)))
    # potri: the blocked inverse (the default) and ScaLAPACK's p?potrs with the identity.
    plan.extend(
        inverse_plan(n, piece, paths=("redistribute", "scalapack"), variants=("donate", "jit"))
    )
    plan.extend(factor_plan(n, piece))
    from eigh_cases import eigh_plan
    from matmul_cases import matmul_plan
    from qr_cases import qr_plan
    from svd_cases import svd_plan
    from triangular_cases import triangular_plan

    plan.extend(qr_plan(n))
    # Its derivatives (XLA's products around the engine's solves) on 1x1, 1x2 and 2x2, as
    # tests/test_grad.py's: 2x1 and 3x2 add no other collective.
    plan.extend(triangular_plan(n, grad=(mesh_rows, mesh_cols) in GRAD_MESHES))
    plan.extend(eigh_plan(n))
    if mesh_rows == 1 or mesh_cols == 1:  # the CPU engine's two stages (1-D grids)
        from eigh_cases import two_stage_plan

        plan.extend(two_stage_plan(n))
    plan.extend(svd_plan(n, derivatives=(mesh_rows, mesh_cols) in GRAD_MESHES))
    plan.extend(matmul_plan(n))
    if mesh_cols == 1:  # JAXMg 0.x's call on a 1-D mesh of the same devices
        plan.append(("potri/jaxmg-0.x-call", "potri-0x-call", dict(n=n)))
    return plan


def _inverse_entry(dtype_name, n, tile, path="default", pad=True, variant=""):
    from linalg_cases import inverse_name

    params = dict(dtype_name=dtype_name, n=n, tile=tile, path=path, pad=pad, variant=variant)
    return inverse_name(dtype_name, n, tile, path, pad, variant), "inverse", params


def inverse_plan(n, piece, paths, variants):
    """potri: four dtypes x tiles that divide, pad, or make one tile per piece; engine paths;
    donation and a user's jit; a matrix that is not positive definite and one not Hermitian."""
    plan = []
    for dtype_name in DTYPE_NAMES:
        for tile in dict.fromkeys((None, 4, 5, piece)):
            plan.append(_inverse_entry(dtype_name, n, tile))
    plan.append(_inverse_entry("float64", n, 2, pad=False))
    for path in paths:
        plan.append(_inverse_entry("complex128", n, 5, path=path))
    for variant in variants:
        plan.append(_inverse_entry("float64", n, 4, variant=variant))
    for kind in ("not-pd", "not-symmetric"):
        plan.append((f"potri/{kind}", "inverse-failure", dict(kind=kind, n=n, tile=4)))
    return plan


def factor_plan(n, piece, tiles=None):
    """inv, slogdet, cho_factor/cho_solve and lu_factor/lu_solve(factor): four dtypes x tiles
    (automatic; 5: padding unless it divides the pieces), a user's jit (factors passed between
    jitted functions), donation, the transposed LU path, and failures."""
    from factor_cases import ROUTINES, factor_name

    tiles = tiles or (None, 5)
    plan = []
    for routine in ROUTINES:
        for dtype_name in DTYPE_NAMES:
            for tile in tiles:
                params = dict(routine=routine, dtype_name=dtype_name, n=n, tile=tile)
                plan.append((factor_name(routine, dtype_name, n, tile), "factor", params))
        variants = ["jit", "donate"] + (["transposed"] if routine in ("slogdet", "lu") else [])
        for variant in variants:
            params = dict(routine=routine, dtype_name="float64", n=n, tile=4, variant=variant)
            plan.append((factor_name(routine, "float64", n, 4, variant), "factor", params))
        if routine == "inv":  # the blocked LU inverse (the CPU's opt-in), with A⁻ᵀ as well
            params = dict(routine=routine, dtype_name="complex128", n=n, tile=5, variant="blocked")
            plan.append((factor_name(routine, "complex128", n, 5, "blocked"), "factor", params))
        kinds = {"inv": ("singular",), "slogdet": ("singular", "nan"), "cho": ("not-pd",)}
        for kind in kinds.get(routine, ("singular",)):
            params = dict(routine=routine, kind=kind, n=n, tile=4)
            plan.append((f"{routine}/{kind}", "factor-failure", params))
    return plan


def gpu_plan(mesh_rows: int, mesh_cols: int) -> list[tuple[str, str, dict]]:
    """[(case name, kind, parameters)] for the GPU engine on one mesh: every engine path
    (in place and transposed, hence P x 1 and 1 x P engine grids and row and column tile
    permutations; padding; redistribution) with residuals, for both routines."""
    lcm = math.lcm(mesh_rows, mesh_cols)
    n = 64 if 64 % lcm == 0 else 48  # (48 on 3 x 2 meshes)
    piece = n // lcm

    def fit(order):  # a larger order, rounded up to the mesh's multiple
        return -(-order // lcm) * lcm

    plan = []

    def solve(*args, **kwargs):
        plan.append(_solve_entry(*args, **kwargs))

    for routine in ROUTINES:
        paths = ["inplace", "transposed", "redistribute"]
        if routine == "lu_solve":  # jaxmg's 1-D LU and cuSOLVERMp's Getrf
            paths += ["cusolvermp"]
        else:  # jaxmg's 1-D Cholesky (1 x P grids and one GPU)
            paths += ["blocked"]
        if mesh_rows * mesh_cols == 1:  # no separate transposed path
            paths.remove("transposed")
        for dtype_name in DTYPE_NAMES:
            for tile in dict.fromkeys((8, 5, piece)):  # divides, pads, one tile per piece
                solve(routine, dtype_name, n, tile, 3)
        for path in paths:
            solve(routine, "float64", n, 8, 3, path=path)
            solve(routine, "complex128", n, 5, 2, path=path)
        solve(routine, "float64", n, 8, 0)  # vector b
        solve(routine, "complex64", n, 4, 10)  # many right-hand sides
        plan.append((f"{routine}/inside-jit", "inside-jit", dict(routine=routine, n=n)))
        plan.append((f"{routine}/singular", "singular", dict(routine=routine, n=n)))
    plan.append(("potrs/singular/blocked", "singular", dict(routine="potrs", n=n, path="blocked")))
    plan.append(("potrs/not-symmetric", "not-symmetric", dict(routine="potrs", n=n)))
    plan.extend(inverse_plan(n, piece, paths=("redistribute",), variants=("donate", "jit")))
    plan.extend(factor_plan(n, piece, tiles=(8, 5)))
    from eigh_cases import eigh_plan
    from matmul_cases import matmul_plan
    from qr_cases import qr_plan
    from svd_cases import svd_plan
    from triangular_cases import triangular_plan

    plan.extend(qr_plan(n, tiles=(8, 5), lstsq_tiles=(8, 5)))
    plan.extend(triangular_plan(n, tiles=(8, 5)))
    # Larger, for the two-stage paths' bands of 64 (tile 128), 48 (96) and 40.
    plan.extend(
        eigh_plan(
            n,
            tiles=(8, 5),
            values=((fit(640), 128), (fit(500), 96), (fit(300), 40)),
            vectors=((fit(640), 128), (fit(300), 40)),
        )
    )
    plan.extend(svd_plan(n, tiles=(8, 5)))
    plan.extend(matmul_plan(n, tiles=(8, 5)))
    return plan
