"""jaxmg.linalg as jax.numpy.linalg and jax.scipy.linalg users write it (against NumPy, four
dtypes, output shardings, unpacking, refusals and error messages, no jax.set_mesh), and
jax.vmap over the distributed routines: one worker process set per mesh runs every case."""

from __future__ import annotations

import inspect
from pathlib import Path

import jax.numpy as jnp
import pytest
from mpirun import mpirun_available, run_cases

import jaxmg.linalg

WORKER = Path(__file__).parent / "mp" / "linalg_worker.py"
# Each mesh runs the per-dtype cases in two dtypes (every dtype on a mesh of several processes;
# all four on every mesh would take minutes of CI per mesh), the float64 cases once, and the
# jax.vmap cases on two meshes. The namespace's calls are the routines tests/routines/ run on
# all six meshes; here a one-process mesh, a 1-D and a 2-D one.
MESHES = {
    (1, 1): ("float32", "complex128", False),
    (2, 1): ("float64", "complex64", True),
    (2, 2): ("complex128", "float32", True),
}
PER_DTYPE = {
    "solve",
    "inv_det",
    "cholesky",
    "eigh",
    "svd",
    "pinv_lstsq",
    "qr",
    "lu",
    "lu_factor",
    "cho_factor",
    "norms",
    "polar",
}
ONCE = {
    "batched",
    "eigh_generalized",
    "lstsq_deficient",
    "jit_no_mesh",
    "grad_unpacked",
    "grad_lu",
    "refusals",
}
VMAP = {
    "vmap_qr_lstsq_syevd",
    "vmap_potrs",
    "vmap_lu_solve_in_jit",
    "vmap_slogdet",
    "vmap_grad",
    "vmap_gesvd",
}


def test_every_dtype_on_a_mesh_of_several_processes():
    for dtype in ("float32", "float64", "complex64", "complex128"):
        assert any(dtype in d for m, d in MESHES.items() if m[0] * m[1] > 1), dtype


@pytest.mark.skipif(not mpirun_available(), reason="needs Open MPI (scripts/setup.sh)")
@pytest.mark.parametrize("mesh", list(MESHES), ids=[f"{r}x{c}" for r, c in MESHES])
def test_linalg_spellings_match_numpy(tmp_path, mesh):
    *dtypes, vmap = MESHES[mesh]
    args = [str(mesh[0]), str(mesh[1]), ",".join(dtypes), str(int(vmap))]
    out = run_cases(mesh[0] * mesh[1], WORKER, args, tmp_path, 600)
    got = {(r["case"], r["dtype"]) for r in out["records"]}
    want = {(c, d) for c in PER_DTYPE for d in dtypes} | {(c, "float64") for c in ONCE}
    want |= {(c, "float64") for c in VMAP} if vmap else set()
    assert got == want
    failed = [r for r in out["records"] if not r["ok"]]
    assert not failed, failed


def test_every_jax_numpy_linalg_name_is_here():
    """Every public name of jax.numpy.linalg is served or refused (NotImplementedError) here,
    under the same name, with jax.numpy.linalg's positional parameters first, in order."""
    for name in dir(jnp.linalg):
        if name.startswith("_") or not callable(getattr(jnp.linalg, name)):
            continue
        assert name in jaxmg.linalg.__all__, name
        ours = getattr(jaxmg.linalg, name)
        if ours is getattr(jnp.linalg, name):
            continue
        theirs = inspect.signature(getattr(jnp.linalg, name)).parameters.values()
        mine = list(inspect.signature(ours).parameters.values())
        positional = [
            p.name for p in theirs if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        assert [p.name for p in mine[: len(positional)]] == positional, name
        keywords = {p.name for p in theirs if p.kind == p.KEYWORD_ONLY}
        assert keywords <= {p.name for p in mine}, name


def test_public_names_have_full_docstrings():
    """Args/Returns/Raises (google style) on every function defined here (the API reference is
    generated from them)."""
    for name in jaxmg.linalg.__all__:
        obj = getattr(jaxmg.linalg, name)
        if getattr(obj, "__module__", "") != "jaxmg.linalg" or isinstance(obj, type):
            continue
        doc = inspect.getdoc(obj) or ""
        assert "Raises:" in doc, name
        if name not in {"eig", "eigvals", "tensorinv", "tensorsolve"}:
            assert "Args:" in doc and "Returns:" in doc, name
