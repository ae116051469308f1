import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxmg

jax.distributed.initialize()
jax.config.update("jax_enable_x64", True)
mesh = jax.make_mesh((jax.device_count(), 1), ("rows", "cols"))
jax.set_mesh(mesh)
grid, rows = NamedSharding(mesh, P("rows", "cols")), NamedSharding(mesh, P("rows", None))


def _order(n, tile, mesh_rows, mesh_cols):
    """The engine's order of a's rows for potrs, cho_factor, potri and syevd (docs/layout.md):
    engine position e holds user row order[e], or -1 for a padding row. `tile` is the T_A the
    routine ran with (capped at the shard, as jaxmg caps it)."""
    big, small = max(mesh_rows, mesh_cols), min(mesh_rows, mesh_cols)
    if big % small:  # grids like 3 x 2 are redistributed: the engine keeps a's order
        return list(range(n))
    piece = n // big  # each shard of the longer mesh axis is one piece
    tile = min(tile, piece)
    padded_piece = math.ceil(piece / tile) * tile  # padded to whole tiles
    tiles = padded_piece * big // tile
    per_device = tiles // big
    k = big // small
    device_of_slot = [0] * big  # mesh position x plays grid position (x mod k) * small + x div k
    for x in range(big):
        device_of_slot[(x % k) * small + x // k] = x
    order = []
    for e in range(tiles * tile):
        i = e // tile  # engine tile i is tile i div P of device (slot i mod P)'s padded shard
        padded = (device_of_slot[i % big] * per_device + i // big) * tile + e % tile
        piece_index, within = divmod(padded, padded_piece)
        order.append(piece_index * piece + within if within < piece else -1)
    return order


def user_row(k, n, tile, mesh_rows, mesh_cols):
    """The row of a that a potrs status k > 0 names: the engine's row k - 1 (the last one of its
    leading minor of order k), in a's own numbering; None for a padding row (or k = N + 1)."""
    order = _order(n, tile, mesh_rows, mesh_cols)
    row = order[k - 1] if 0 < k <= len(order) else -1
    return None if row < 0 else row


def engine_index(row, n, tile, mesh_rows, mesh_cols):
    """Where row `row` of a sits in the engine's order (0-based): the inverse of user_row."""
    return _order(n, tile, mesh_rows, mesh_cols).index(row)


n, T = 512, 64
mesh_rows, mesh_cols = mesh.shape["rows"], mesh.shape["cols"]
A = 4 * np.eye(n) + 0.01  # symmetric positive definite
b = jax.device_put(np.ones((n, 1)), rows)


def on_devices(M):  # each process builds its own shards: no cross-process value check
    return jax.make_array_from_callback(M.shape, grid, lambda index: M[index])


for r in (5, 100, 300, 500):
    # A negative pivot: the factorization stops at r, and the status names it exactly.
    M = A.copy()
    M[r, r] = -4.0
    x, status = jaxmg.potrs(on_devices(M), b, T_A=T, return_status=True)
    k = int(status)
    assert k == engine_index(r, n, T, mesh_rows, mesh_cols) + 1
    assert user_row(k, n, T, mesh_rows, mesh_cols) == r

    # A NaN: it spreads through the rest of the factor, each process reports the first bad
    # diagonal entry it holds, and the status is the largest of those (at or after r's place).
    M = A.copy()
    M[r, r] = np.nan
    x, status = jaxmg.potrs(on_devices(M), b, T_A=T, return_status=True)
    k = int(status)
    assert k > engine_index(r, n, T, mesh_rows, mesh_cols)
    assert np.isnan(np.asarray(x.addressable_data(0))).all()  # NaN outputs on every device
    # To find a non-finite input itself, ask the matrix: N booleans, replicated.
    finite = jax.sharding.reshard(jnp.isfinite(on_devices(M)).all(axis=1), P())
    assert list(np.flatnonzero(~np.asarray(finite.addressable_data(0)))) == [r]
