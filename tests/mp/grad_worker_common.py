"""What the derivative workers share: tangent directions of a matrix."""

import numpy as np


def directions(n, dtype, seed, hermitian):
    rng = np.random.default_rng(seed)
    s1 = rng.standard_normal((n, n))
    s2 = rng.standard_normal((n, n))
    if hermitian:
        s1, s2 = (s1 + s1.T) / 2, (s2 + s2.T) / 2
    if np.issubdtype(dtype, np.complexfloating):
        h = rng.standard_normal((n, n))
        s2 = s2 + 1j * ((h - h.T) / 2 if hermitian else h)
    return s1.astype(dtype), s2.astype(dtype)
