"""Fits an exact Gaussian process's hyperparameters by gradient descent on the marginal
likelihood, with the kernel matrix sharded over every device of every process.

    python -m jaxmg launch -n 2 examples/gaussian_process.py [--n 1024] [--steps 40] [--json F]
        [--axis-types explicit|auto] [--factor-dtype float32]

The data are drawn from a GP with known hyperparameters (variance, length scale, noise); above
N = 8192 they are a smooth function plus noise of that level (an exact draw needs a Cholesky
factorization of the N x N kernel on the host). Each step evaluates the negative log marginal
likelihood

    NLL(θ) = ½ yᵀ K(θ)⁻¹ y + ½ log det K(θ) + ½ n log 2π,   K = σ² exp(−|x−x'|²/2ℓ²) + σₙ² I

and its gradient with respect to log(σ², ℓ, σₙ²): `jaxmg.potrs` gives K⁻¹y and log det K from
one distributed Cholesky factorization, and `jax.value_and_grad` differentiates through it with
jaxmg's own distributed routines (the matrix is never gathered). K is built where it lies: each
device computes its block from the points of its rows and of its columns, so no device ever holds
the N x N matrix (docs/bigmatrix.md). The mesh's axes are JAX's default, Explicit (the shardings
are part of the arrays' types), or Auto (--axis-types auto): the same code runs on both.

Then, with the fitted hyperparameters, the posterior mean's weights K⁻¹ y (the mean at new
points x* is K(x*, x) K⁻¹ y): with --factor-dtype float32 from a mixed precision solve (K
factored in float32, refined to float64; docs/mixed_precision.md), checked against the float64
solve's. (The likelihood's log-determinant stays in float64: a
float32 factor gives log det K only to float32 accuracy, and potrs refuses return_logdet
with factor_dtype.)
"""

from __future__ import annotations

import argparse
import json
import math
import time

import jax

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402

# Up to this N the data are an exact draw from the GP; beyond, a smooth function plus noise.
EXACT_SAMPLE_MAX = 8192


def place(x, mesh, spec):
    """x laid out as `spec` over `mesh`, inside jit: a reshard on Explicit mesh axes (a
    with_sharding_constraint there is an error), a sharding constraint on Auto ones."""
    sharding = NamedSharding(mesh, spec)
    if all(t == jax.sharding.AxisType.Explicit for t in mesh.axis_types):
        return jax.sharding.reshard(x, sharding)
    return jax.lax.with_sharding_constraint(x, sharding)


def kernel(log_params, x, mesh=None, xp=jnp):
    """K(θ) of the points x (N, d). With `mesh`, built shard by shard, rows over the mesh's
    "rows" axis and columns over "cols": each device computes its block from the points of its
    rows and of its columns (N x d: small): a device holds its block of K and temporaries of
    the block's size, never the whole matrix."""
    variance, length, noise = xp.exp(log_params)
    if mesh is None:  # NumPy, for the data
        sq = xp.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1)
        return variance * xp.exp(-0.5 * sq / length**2) + noise * xp.eye(x.shape[0])
    rows, cols = place(x, mesh, P("rows", None)), place(x, mesh, P("cols", None))
    sq = jnp.sum((rows[:, None, :] - cols[None, :, :]) ** 2, axis=-1)  # (N, N), in blocks
    i = place(jnp.arange(x.shape[0]), mesh, P("rows"))  # global row and column indices
    j = place(jnp.arange(x.shape[0]), mesh, P("cols"))
    k = variance * jnp.exp(-0.5 * sq / length**2) + jnp.where(i[:, None] == j[None, :], noise, 0.0)
    return place(k, mesh, P("rows", "cols"))


def make_nll(x, mesh):
    n = x.shape[0]

    @jax.jit
    def nll(log_params, y):
        k = kernel(log_params, x, mesh)
        alpha, logdet = jaxmg.potrs(k, y, return_logdet=True)  # alpha in y's sharding
        # yᵀα as a sum of products: on Explicit axes jnp.dot(y, alpha), contracting two
        # sharded vectors, needs out_sharding=P() (JAX's rule).
        fit = 0.5 * jnp.sum(y * alpha)
        return fit + 0.5 * logdet + 0.5 * n * math.log(2 * math.pi)

    return nll


def posterior_weights(x, mesh, log_params, y, factor_dtype):
    """The posterior mean's weights α = K⁻¹ y (the mean at points x* is K(x*, x) α): with
    `factor_dtype`, from a mixed precision solve, compared with the float64 solve's."""

    @jax.jit
    def weights(log_params, y):
        k = kernel(log_params, x, mesh)
        alpha64 = jaxmg.potrs(k, y)
        if factor_dtype is None:
            return alpha64, alpha64, None
        alpha, info = jaxmg.potrs(k, y, factor_dtype=factor_dtype, return_info=True)
        return alpha, alpha64, info

    alpha, alpha64, info = weights(log_params, y)
    diff = jnp.max(jnp.abs(alpha - alpha64)) / jnp.max(jnp.abs(alpha64))
    return dict(
        factor_dtype=factor_dtype,
        path="float64" if info is None else info.path_name(),
        iterations=0 if info is None else int(np.asarray(info.iterations.addressable_data(0))),
        weights_rel_diff=float(np.asarray(diff.addressable_data(0))),
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1024, help="data points (a multiple of the devices)")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--lr", type=float, default=1.0, help="gradient-descent step on log θ, / n")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write the trajectory here (process 0)")
    p.add_argument(
        "--axis-types",
        choices=("explicit", "auto"),
        default="explicit",
        help="the mesh's axis types (explicit: JAX's default)",
    )
    p.add_argument(
        "--factor-dtype",
        choices=("float32",),
        default=None,
        help="the posterior mean's weights K⁻¹y from a mixed precision solve (float32 factor)",
    )
    args = p.parse_args(argv)

    devices = jax.device_count()
    rows = 2 if devices % 2 == 0 and devices > 2 else devices
    kind = (
        jax.sharding.AxisType.Explicit
        if args.axis_types == "explicit"
        else jax.sharding.AxisType.Auto
    )
    mesh = jax.make_mesh((rows, devices // rows), ("rows", "cols"), axis_types=(kind, kind))
    y_sharding = NamedSharding(mesh, P("rows"))

    # Data from a GP with known hyperparameters (the same on every process).
    rng = np.random.default_rng(args.seed)
    true = np.log(np.array([1.5, 0.3, 0.05]))
    x = np.sort(rng.uniform(-2.0, 2.0, size=(args.n, 1)), axis=0)
    if args.n <= EXACT_SAMPLE_MAX:
        k_true = kernel(true, x, xp=np)
        y = np.linalg.cholesky(k_true) @ rng.standard_normal(args.n)
    else:  # (an exact sample needs a host Cholesky of the N x N kernel)
        y = np.sin(3 * x[:, 0]) + math.sqrt(np.exp(true[2])) * rng.standard_normal(args.n)
    y_global = jax.make_array_from_callback(y.shape, y_sharding, lambda idx: y[idx])

    nll = make_nll(jnp.asarray(x), mesh)
    value_and_grad = jax.jit(jax.value_and_grad(nll))
    log_params = jnp.log(jnp.array([1.0, 1.0, 0.5]))
    history = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        value, grad = value_and_grad(log_params, y_global)
        value = float(value)
        seconds = time.perf_counter() - t0
        history.append(
            dict(step=step, nll=value, params=np.exp(log_params).tolist(), seconds=seconds)
        )
        if jax.process_index() == 0:
            variance, length, noise = history[-1]["params"]
            print(
                f"step {step:3d}  NLL {value:12.4f}  variance {variance:.4f}  "
                f"length {length:.4f}  noise {noise:.4f}  ({seconds * 1e3:.1f} ms)",
                flush=True,
            )
        log_params = log_params - args.lr * grad / args.n
    posterior = posterior_weights(jnp.asarray(x), mesh, log_params, y_global, args.factor_dtype)
    if jax.process_index() == 0:
        print("true    variance {:.4f}  length {:.4f}  noise {:.4f}".format(*np.exp(true)))
        print(
            "posterior weights K⁻¹y: {} (path {}, {} steps), {:.1e} from float64's".format(
                args.factor_dtype or "float64",
                posterior["path"],
                posterior["iterations"],
                posterior["weights_rel_diff"],
            )
        )
        if args.json:
            with open(args.json, "w") as f:
                json.dump(
                    dict(
                        n=args.n,
                        devices=devices,
                        mesh=[rows, devices // rows],
                        axis_types=args.axis_types,
                        true=np.exp(true).tolist(),
                        data="GP sample" if args.n <= EXACT_SAMPLE_MAX else "sin(3x) + noise",
                        x=x[:, 0].tolist() if args.n <= EXACT_SAMPLE_MAX else None,
                        y=y.tolist() if args.n <= EXACT_SAMPLE_MAX else None,
                        history=history,
                        posterior=posterior,
                    ),
                    f,
                    indent=1,
                )


if __name__ == "__main__":
    main()
