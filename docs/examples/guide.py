import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.multihost_utils import process_allgather
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxmg
from jaxmg import linalg

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)
mesh = jax.make_mesh((jax.device_count(), 1), ("rows", "cols"))
jax.set_mesh(mesh)
grid, rows = NamedSharding(mesh, P("rows", "cols")), NamedSharding(mesh, P("rows", None))


def gather(x):  # the whole array, as NumPy, on every process
    return process_allgather(x, tiled=True)


rng = np.random.default_rng(0)
n = 256

# --8<-- [start:gp]
# A Gaussian process: K (n x n, SPD) and the observations y.
X = np.linspace(0.0, 1.0, n)
K = np.exp(-((X[:, None] - X[None, :]) ** 2) / 0.1) + 1e-2 * np.eye(n)
Y = np.sin(6 * X)[:, None]
k, y = jax.device_put(K, grid), jax.device_put(Y, rows)


def neg_log_likelihood(k, y):  # 1/2 yᵀ K⁻¹ y + 1/2 log det K + n/2 log 2π
    alpha, logdet = jaxmg.potrs(k, y, return_logdet=True)
    return 0.5 * jnp.sum(y * alpha) + 0.5 * logdet + 0.5 * n * np.log(2 * np.pi)


nll, dk = jax.value_and_grad(neg_log_likelihood)(k, y)  # dk lies like k

f = jaxmg.cho_factor(k)  # keep the factor: many solves, one factorization
mean = jaxmg.cho_solve(f, y)  # K⁻¹ y again, no refactorization
assert abs(float(f.logdet) - np.linalg.slogdet(K)[1]) < 1e-8
# --8<-- [end:gp]
assert np.abs(gather(mean) - np.linalg.solve(K, Y)).max() < 1e-6

# --8<-- [start:minsr]
# MinSR / natural gradient: O (samples x parameters), solve (O Oᴴ + λ I) t = e.
S = rng.standard_normal((n, 3 * n)) / np.sqrt(3 * n)
T = S @ S.T  # n x n, SPD up to round-off (rank n here; often near-singular in practice)
E = rng.standard_normal((n, 1))
lam = 1e-3
t = jaxmg.potrs(jax.device_put(T + lam * np.eye(n), grid), jax.device_put(E, rows))
# Near-singular T: the minimum-norm solution pinv(T) e cuts the small singular values instead.
t_pinv = linalg.lstsq(jax.device_put(T, grid), jax.device_put(E, rows), rcond=1e-10)[0]
# --8<-- [end:minsr]
assert np.abs(gather(t) - np.linalg.solve(T + lam * np.eye(n), E)).max() < 1e-8
assert np.abs(gather(t_pinv) - np.linalg.pinv(T, rcond=1e-10) @ E).max() < 1e-6

# --8<-- [start:eigh]
# Electronic structure: H c = ε S c, H Hermitian, S (the overlap) positive definite.
H = rng.standard_normal((n, n))
H = (H + H.T) / 2
B = rng.standard_normal((n, n))
S_overlap = B @ B.T / n + np.eye(n)
h, s = jax.device_put(H, grid), jax.device_put(S_overlap, grid)
w, V = jaxmg.eigh(h, s)  # all eigenpairs, ascending; V in h's sharding
lowest, C = jaxmg.eigh(h, s, subset_by_index=(0, 8))  # the 8 lowest pairs; C is N x 8
w0 = jaxmg.syevd(h, return_eigenvectors=False)  # the standard problem, values only
# --8<-- [end:eigh]
w_ref = np.sort(np.linalg.eigvals(np.linalg.solve(S_overlap, H)).real)
assert np.abs(np.asarray(lowest.addressable_data(0)) - w_ref[:8]).max() < 1e-8
assert C.shape == (n, 8)
assert np.abs(np.asarray(w0.addressable_data(0)) - np.linalg.eigvalsh(H)).max() < 1e-8

# --8<-- [start:pca]
# PCA: the data matrix (samples x features), centred, then its SVD.
D = rng.standard_normal((4 * n, n // 2)) @ rng.standard_normal((n // 2, n // 2))
D = D - D.mean(axis=0)
U, s_vals, Vh = jaxmg.gesvd(jax.device_put(D, grid))  # tall: U (4n x n/2), s, Vh
explained = s_vals**2 / jnp.sum(s_vals**2)  # variance ratio per component
scores = U * s_vals  # each sample's coordinates on the principal axes (the rows of Vh)
# --8<-- [end:pca]
s_ref = np.linalg.svd(D, compute_uv=False)
assert np.abs(np.asarray(s_vals.addressable_data(0)) - s_ref).max() < 1e-8

# --8<-- [start:lstsq]
# Least squares: argmin ‖A x − b‖ for a tall A of full rank (QR), or any rank (SVD).
A = rng.standard_normal((4 * n, n))
Bv = rng.standard_normal((4 * n, 2))
a, b = jax.device_put(A, grid), jax.device_put(Bv, rows)
x = jaxmg.least_squares(a, b)  # QR, then a solve with R
x_svd, residuals, rank, sv = linalg.lstsq(a, b)  # the minimum-norm solution (SVD)
# --8<-- [end:lstsq]
x_ref = np.linalg.lstsq(A, Bv, rcond=None)[0]
assert np.abs(gather(x) - x_ref).max() < 1e-10 and np.abs(gather(x_svd) - x_ref).max() < 1e-10
