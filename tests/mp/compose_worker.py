"""jaxmg inside the ways JAX programs place and trace arrays: `jax.set_mesh` with Auto and with
Explicit axes (eager and inside jit, no mesh= argument), a user's jit with donation, and
tracing on an AbstractMesh (`jax.jit(...).trace` on ShapeDtypeStructs, no arrays).

Usage: mpirun -n P python compose_worker.py ROWS COLS OUT.json
"""

import json
import sys
import traceback
from pathlib import Path

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402

import jaxmg  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from linalg_cases import A_SPEC, B_SPEC, gather, place, rhs, spd  # noqa: E402

rows, cols, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
N = 24
h, b = spd(N, np.float64, 2), rhs(N, 2, np.float64, 2)
t = np.random.default_rng(9).standard_normal((2 * N, N))
x_ref = np.linalg.solve(h, b)


def err(x, ref):
    return float(np.abs(np.asarray(x) - ref).max() / max(np.abs(ref).max(), 1.0))


def solve_qr_eigh(mesh, jit):
    """potrs, qr and syevd with no mesh= (the mesh comes from the arrays or jax.set_mesh)."""
    hp, bp, tp = place(h, mesh, A_SPEC), place(b, mesh, B_SPEC), place(t, mesh, A_SPEC)

    def run(hp, bp, tp):
        x = jaxmg.potrs(hp, bp)
        q, r = jaxmg.qr(tp)
        w = jaxmg.syevd(hp, return_eigenvectors=False)
        return x, q, r, w

    x, q, r, w = jax.jit(run)(hp, bp, tp) if jit else run(hp, bp, tp)
    return max(
        err(gather(x), x_ref),
        err(gather(q) @ gather(r), t),
        err(gather(w), np.linalg.eigvalsh(h)),
    )


def mesh_of(kind):
    types = (AxisType.Explicit if kind == "explicit" else AxisType.Auto,) * 2
    return jax.make_mesh((rows, cols), ("pr", "pc"), axis_types=types)


def case_set_mesh_auto():
    mesh = mesh_of("auto")
    with jax.set_mesh(mesh):
        return max(solve_qr_eigh(mesh, jit=False), solve_qr_eigh(mesh, jit=True))


def case_set_mesh_explicit():
    mesh = mesh_of("explicit")
    with jax.set_mesh(mesh):
        return max(solve_qr_eigh(mesh, jit=False), solve_qr_eigh(mesh, jit=True))


def case_jit_donation():
    mesh = mesh_of("auto")
    fn = jax.jit(lambda a, v: jaxmg.potrs(a, v, donate=True), donate_argnums=0)
    x = fn(place(h, mesh, A_SPEC), place(b, mesh, B_SPEC))
    return err(gather(x), x_ref)


def case_abstract_mesh_trace():
    """Traced with ShapeDtypeStructs on the mesh's AbstractMesh (no arrays, no devices named),
    then lowered and run on the concrete mesh."""
    mesh = mesh_of("explicit")
    abstract = mesh.abstract_mesh
    a_s = jax.ShapeDtypeStruct((N, N), np.float64, sharding=NamedSharding(abstract, A_SPEC))
    b_s = jax.ShapeDtypeStruct((N, 2), np.float64, sharding=NamedSharding(abstract, B_SPEC))
    fn = jax.jit(lambda a, v: jaxmg.potrs(a, v, return_logdet=True))
    with jax.sharding.use_abstract_mesh(abstract):
        traced = fn.trace(a_s, b_s)
    shapes = [tuple(o.shape) for o in jax.tree.leaves(traced.out_info)]
    assert shapes == [(N, 2), ()], shapes
    with jax.set_mesh(mesh):
        x, _ = fn(place(h, mesh, A_SPEC), place(b, mesh, B_SPEC))
    return err(gather(x), x_ref)


def case_shard_map_blocks():
    """potrs, lu_solve and syevd on blocks inside a user's shard_map (in a jit)."""
    from jax.sharding import PartitionSpec as P

    mesh = mesh_of("auto")

    def body(ab, bb):
        x, logdet = jaxmg.potrs_blocks(ab, bb, mesh=mesh, return_logdet=True)
        y = jaxmg.lu_solve_blocks(ab, bb, mesh=mesh)
        w, v = jaxmg.syevd_blocks(ab, mesh=mesh)
        return x, logdet, y, w, v

    fn = jax.jit(
        jax.shard_map(
            body,
            mesh=mesh,
            in_specs=(A_SPEC, B_SPEC),
            out_specs=(B_SPEC, P(), B_SPEC, P(), A_SPEC),
            check_vma=False,
        )
    )
    x, logdet, y, w, v = fn(place(h, mesh, A_SPEC), place(b, mesh, B_SPEC))
    vg, ref = gather(v), np.linalg.eigvalsh(h)
    return max(
        err(gather(x), x_ref),
        abs(float(np.asarray(logdet.addressable_data(0))) - np.linalg.slogdet(h)[1]),
        err(gather(y), x_ref),
        err(gather(w), ref),
        err(h @ vg, vg * ref),
    )


records = []
for name, fn in list(globals().items()):
    if not name.startswith("case_"):
        continue
    try:
        e = fn()
        records.append(dict(case=name[5:], error=e, ok=bool(e <= 1e-9)))
    except Exception as ex:  # noqa: BLE001 - recorded, asserted by the test
        records.append(
            dict(
                case=name[5:],
                ok=False,
                exception=f"{type(ex).__name__}: {ex}"[:2000],
                trace=traceback.format_exc()[-3000:],
            )
        )
if jax.process_index() == 0:
    Path(out_path).write_text(json.dumps(dict(records=records), indent=1))
