"""The conjugate transpose, written once for the library."""

from __future__ import annotations

import jax.numpy as jnp


def transpose(x, conjugate: bool = True):
    """xᴴ of a matrix (xᵀ with conjugate=False, and for real x either way)."""
    return jnp.conj(x.T) if conjugate and jnp.iscomplexobj(x) else x.T
