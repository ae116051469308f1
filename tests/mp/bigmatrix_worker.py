"""A matrix built where it lies, on meshes of Explicit and of Auto axes: a Gaussian-process
kernel built inside jit shard by shard, solved with potrs (value and gradient of the negative
log marginal likelihood, as examples/gaussian_process.py) and with cho_factor / cho_solve,
against NumPy; the shardings of the kernel and of the results. The warning for a large
replicated matrix, and the error for an order that does not divide over the mesh.

Usage: mpirun -n 2 python bigmatrix_worker.py OUT.json
"""

import json
import sys
import traceback
import warnings

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402

out_path = sys.argv[1]
N = 64
EPS = np.finfo(np.float64).eps
rng = np.random.default_rng(0)
X = np.sort(rng.uniform(-2.0, 2.0, size=(N, 2)), axis=0)
Y = rng.standard_normal(N)
THETA = np.log(np.array([1.5, 0.7, 0.5]))  # variance, length scale, noise


def place(x, mesh, spec):
    """x in `spec` over `mesh` inside jit: a reshard on Explicit axes, a constraint on Auto."""
    sharding = NamedSharding(mesh, spec)
    if mesh.axis_types[0] == AxisType.Explicit:
        return jax.sharding.reshard(x, sharding)
    return jax.lax.with_sharding_constraint(x, sharding)


def kernel(log_params, x, mesh):
    variance, length, noise = jnp.exp(log_params)
    rows, cols = place(x, mesh, P("rows", None)), place(x, mesh, P("cols", None))
    sq = jnp.sum((rows[:, None, :] - cols[None, :, :]) ** 2, axis=-1)
    i = place(jnp.arange(x.shape[0]), mesh, P("rows"))
    j = place(jnp.arange(x.shape[0]), mesh, P("cols"))
    k = variance * jnp.exp(-0.5 * sq / length**2) + jnp.where(i[:, None] == j[None, :], noise, 0.0)
    return place(k, mesh, P("rows", "cols"))


def numpy_reference():
    variance, length, noise = np.exp(THETA)
    sq = np.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    base = variance * np.exp(-0.5 * sq / length**2)
    k = base + noise * np.eye(N)
    alpha = np.linalg.solve(k, Y)
    logdet = np.linalg.slogdet(k)[1]
    nll = 0.5 * Y @ alpha + 0.5 * logdet
    # d NLL / d log θ = ½ tr((K⁻¹ − α αᵀ) dK/d log θ)
    w = np.linalg.inv(k) - np.outer(alpha, alpha)
    dks = (base, base * sq / length**2, noise * np.eye(N))
    grad = np.array([0.5 * np.sum(w * dk) for dk in dks])
    return k, alpha, logdet, nll, grad


K, ALPHA, LOGDET, NLL, GRAD = numpy_reference()
COND = float(np.linalg.cond(K))
TOL = 10 * N * EPS * COND  # relative, in the largest entry


def rel(got, want):
    got, want = np.asarray(got), np.asarray(want)
    return float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))


def spec_of(x):
    """x's spec, entries of one-device axes dropped (JAX prints them either way)."""
    sizes = dict(zip(x.sharding.mesh.axis_names, x.sharding.mesh.axis_sizes, strict=True))
    spec = tuple(x.sharding.spec) + (None,) * (x.ndim - len(x.sharding.spec))
    return [e if e is not None and sizes[e] > 1 else None for e in spec]


def gather(x):
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def gp_case(shape, types):
    mesh = jax.make_mesh(shape, ("rows", "cols"), axis_types=types)
    rec = {}
    y = jax.make_array_from_callback(Y.shape, NamedSharding(mesh, P("rows")), lambda i: Y[i])
    x = jnp.asarray(X)
    theta = jnp.asarray(THETA)
    typed = {}

    @jax.jit
    def solve(log_params, y):
        k = kernel(log_params, x, mesh)
        alpha, logdet = jaxmg.potrs(k, y, return_logdet=True)
        typed["alpha"] = str(jax.typeof(alpha))
        return k, alpha, logdet

    @jax.jit
    def nll(log_params, y):
        k = kernel(log_params, x, mesh)
        alpha, logdet = jaxmg.potrs(k, y, return_logdet=True)
        return 0.5 * jnp.sum(y * alpha) + 0.5 * logdet

    @jax.jit
    def factored(log_params, y):
        f = jaxmg.cho_factor(kernel(log_params, x, mesh))
        return jaxmg.cho_solve(f, y), f.logdet

    k, alpha, logdet = solve(theta, y)
    rec["kernel_spec"] = spec_of(k)
    rec["kernel_shards"] = [list(s.data.shape) for s in k.addressable_shards]
    rec["kernel"] = rel(gather(k), K)
    rec["alpha_spec"], rec["y_spec"] = spec_of(alpha), spec_of(y)
    rec["alpha_type"] = typed["alpha"]
    rec["alpha"] = rel(gather(alpha), ALPHA)
    rec["logdet"] = abs(float(logdet) - LOGDET) / max(1.0, abs(LOGDET))
    value, grad = jax.jit(jax.value_and_grad(nll))(theta, y)
    rec["nll"] = abs(float(value) - NLL) / max(1.0, abs(NLL))
    rec["grad"] = rel(grad, GRAD)
    x_f, logdet_f = factored(theta, y)
    rec["cho_solve"] = rel(gather(x_f), ALPHA)
    rec["cho_solve_spec"] = spec_of(x_f)
    rec["cho_logdet"] = abs(float(logdet_f) - LOGDET) / max(1.0, abs(LOGDET))
    # The compiled kernel: no buffer of XLA's as large as the whole matrix on a device.
    memory = solve.lower(theta, y).compile().memory_analysis()
    rec["temp_bytes"] = int(memory.temp_size_in_bytes)
    rec["matrix_bytes"] = N * N * 8
    return rec


def caught(fn):
    """(fn's warnings as (category, filename), fn's result) under Python's default filter."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        result = fn()
    return [(w.category.__name__, w.filename, str(w.message)) for w in seen], result


def warning_cases():
    mesh = jax.make_mesh((2, 1), ("rows", "cols"))  # JAX's default: Explicit axes
    a_np = K
    whole = jax.device_put(a_np, NamedSharding(mesh, P()))
    split = jax.device_put(a_np, NamedSharding(mesh, P("rows", "cols")))
    b = jax.device_put(Y, NamedSharding(mesh, P("rows")))
    rec = {"file": __file__}

    def three_calls(a):
        def run():
            xs = [jaxmg.potrs(a, b, mesh=mesh) for _ in range(3)]  # one line: one call site
            return rel(gather(xs[-1]), ALPHA)

        return run

    with jaxmg.config.override(replicated_warning_bytes=1024):
        rec["replicated"], rec["replicated_x"] = caught(three_calls(whole))
        rec["sharded"], _ = caught(three_calls(split))
        rec["numpy"], _ = caught(lambda: jaxmg.potrs(a_np, Y, mesh=mesh))
        rec["factor"], _ = caught(lambda: jaxmg.cho_factor(whole))
        rec["jit"], _ = caught(lambda: jax.jit(lambda a, b: jaxmg.potrs(a, b))(whole, b))
        grad = jax.jit(jax.grad(lambda a, b: jnp.sum(jaxmg.potrs(a, b, return_logdet=True)[1])))
        rec["grad"], _ = caught(lambda: grad(whole, b))
    rec["default_threshold"], _ = caught(three_calls(whole))
    with jaxmg.config.override(replicated_warning_bytes=0):
        rec["off"], _ = caught(three_calls(whole))
    return rec


def divisibility_case(types, rec):
    n = 9
    a = np.eye(n) * 2.0 + 0.1 * np.ones((n, n))
    b = np.ones(n)
    mesh = jax.make_mesh((2, 1), ("rows", "cols"), axis_types=types)
    name = types[0].name.lower()

    def error(fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - the message is the result
            return f"{type(e).__name__}: {e}"
        return "no error"

    rec[f"{name}_numpy"] = error(lambda: jaxmg.potrs(a, b, mesh=mesh))
    rec[f"{name}_qr"] = error(lambda: jaxmg.qr(np.ones((n, 4)), mesh=mesh))
    if types[0] == AxisType.Auto:  # an uneven constraint is JAX's to allow, on Auto axes

        @jax.jit
        def built(scale):
            sharding = NamedSharding(mesh, P("rows", "cols"))
            m = jax.lax.with_sharding_constraint(scale * jnp.asarray(a), sharding)
            return jaxmg.potrs(m, jnp.asarray(b))

        rec[f"{name}_jit"] = error(lambda: built(1.0))
    # Padded to 10: [[A, 0], [0, 1]] and b with a zero row.
    a_padded = np.eye(n + 1)
    a_padded[:n, :n] = a
    b_padded = np.zeros(n + 1)
    b_padded[:n] = b
    sharding = NamedSharding(mesh, P("rows", "cols"))
    ap = jax.make_array_from_callback(a_padded.shape, sharding, lambda i: a_padded[i])
    sharding = NamedSharding(mesh, P("rows"))
    bp = jax.make_array_from_callback(b_padded.shape, sharding, lambda i: b_padded[i])
    x, logdet = jaxmg.potrs(ap, bp, return_logdet=True)
    x = gather(x)
    rec[f"{name}_padded"] = rel(x[:n], np.linalg.solve(a, b))
    rec[f"{name}_padded_tail"] = float(abs(x[n]))
    rec[f"{name}_padded_logdet"] = abs(float(logdet) - np.linalg.slogdet(a)[1])


def divisibility_cases():
    rec = {}
    for types in ((AxisType.Explicit,) * 2, (AxisType.Auto,) * 2):
        divisibility_case(types, rec)
    return rec


results = {"tol": TOL, "cond": COND}
for label, fn in [
    *[
        (f"gp_{r}x{c}_{t}", lambda r=r, c=c, t=t: gp_case((r, c), (getattr(AxisType, t),) * 2))
        for r, c in ((2, 1), (1, 2))
        for t in ("Explicit", "Auto")
    ],
    ("warnings", warning_cases),
    ("divisibility", divisibility_cases),
]:
    try:
        results[label] = fn()
    except Exception as e:  # noqa: BLE001 - reported by the test
        results[label] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
if jax.process_index() == 0:
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)
