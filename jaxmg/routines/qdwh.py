"""The engine's QDWH polar decomposition as routines (csrc/routines/polar.h): shared by
jaxmg.polar and by gesvd's QDWH-SVD, so that neither module imports the other."""

from __future__ import annotations

from jaxmg._core import routine as _routine


def _variant(name, h):
    # As gesvd (csrc/routines/gesvd.h): the engine holds A, redistributed; Up comes back in a's
    # sharding, H (N x N) in x.
    return _routine.EngineRoutine(
        name=name,
        symmetric=False,
        hand_transpose=_routine.never_transpose,
        returns_matrix=True,
        takes_rhs=False,
        rectangular=True,
        redistribute=True,
        solution_cols=(lambda n, nrhs: n) if h else (lambda n, nrhs: 1),
        solution_whole=not h,
    )


POLAR = _variant("polar", True)  # Up and H
POLAR_UP = _variant("polar_up", False)  # Up alone
