"""jaxmg's configuration: the engines' algorithm choices and tuning, set from Python with
`jaxmg.config` (`update`, `override`), their defaults read from the JAXMG_* environment variables
once, at first use. This module is the one place the package reads jaxmg's environment.

Every call hands the configuration in effect when it is built to its engine as one FFI attribute,
`config` (a dictionary, decoded once by csrc/ffi/config.h into csrc/common/config.h's Config). So
the configuration is part of the key of jaxmg's compiled calls, and the call agreement's
fingerprint hashes it whole: processes configured differently get the agreement's error on
every process instead of pairing different collectives. A function the user jits reads it when
it is traced, like any Python value it closes over.

The test hooks (`rows_per_chunk`, `test_fail`, `redistribute`) are fields too, set only through
`jaxmg._core.testing.hooks`. Three process settings stay environment-only and are read once:
JAXMG_CALL_TIMEOUT (the native engines read it too: csrc/common/environment.h), JAXMG_BOOTSTRAP
and JAXMG_LIB_DIR.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import operator
import os
import threading
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

# The string values of the algorithm choices, as csrc/common/config.h's Choice.
_CHOICE_CODES = {
    "auto": 0,
    "scalapack": 1,
    "cusolvermp": 1,
    "two-stage": 2,
    "blocked": 2,
    "fused": 2,
    "tf32": 3,
    "bf16x9": 4,
    "fixed-point": 5,
    "bf16x9+fixed-point": 6,
}


def _choice(*values: str, doc: str):
    return field(
        default="auto", metadata={"kind": "choice", "values": ("auto", *values), "doc": doc}
    )


def _count(default: int, lowest: int, doc: str, engine: bool = True):
    return field(
        default=default,
        metadata={"kind": "count", "lowest": lowest, "doc": doc, "engine": engine},
    )


def _hook(default, doc: str, engine: bool = True):
    return field(default=default, metadata={"kind": "hook", "engine": engine, "doc": doc})


@dataclass(frozen=True)
class Config:
    """The configuration of a call (immutable; `jaxmg.config.current()` gives the one in effect).

    Algorithm choices ("auto": the engine's measured default):

    - cpu_lu: "scalapack": lu_solve, lu_factor, inv and slogdet factor with p?getrf on every CPU
      grid ("auto": jaxmg's 1-D LU on 1 x P engine grids).
    - cpu_cholesky, gpu_cholesky: "blocked": potrs, cho_factor, potri and slogdet's Cholesky
      factorization by jaxmg's 1-D blocked Cholesky on 1 x P engine grids and one device (its
      trailing updates are the engine's own products, so on GPUs `gpu_math="tf32"` puts a
      float32 factor's on tensor cores); "auto": p?potrf on CPUs, the library's on GPUs
      (cuSOLVERMp's, cusolverDn's on one GPU).
    - cpu_qr: "scalapack": qr with p?geqrf and p?orgqr ("auto": jaxmg's 1-D QR on 1 x P grids).
    - cpu_inverses: "blocked": potri and inv by jaxmg's blocked inverses; "scalapack": by p?potrs
      with the identity and p?getri ("auto": potri blocked, inv p?getri).
    - cpu_eigh: on 1 x P and P x 1 CPU grids, "two-stage": syevd by jaxmg's two-stage
      eigensolver; "scalapack": by p?syevd ("auto": eigenvalues alone in two stages, with
      eigenvectors p?syevd).
    - gpu_lu: "cusolvermp": cuSOLVERMp's Getrf on every GPU grid ("auto": jaxmg's 1-D LU on
      1 x P grids).
    - gpu_qr: "cusolvermp": cuSOLVERMp's Geqrf and Orgqr on every GPU grid ("auto": jaxmg's 1-D
      QR on 1 x P grids).
    - gpu_eigh, gpu_eigvals: syevd with eigenvectors, and eigenvalues alone, on GPUs:
      "two-stage" (1 x P and P x 1 grids) or "cusolvermp" ("auto": two stages on one GPU,
      cuSOLVERMp's Syevd on several).
    - gpu_one_device: "cusolvermp": cuSOLVERMp on a 1 x 1 grid too ("auto": cusolverDn there).
    - gpu_math: the GPU engine's products on tensor cores ("auto": native float32 and float64).
      "tf32": the float32 products of jaxmg's own algorithms (the 1-D LU and QR, the two
      stages) in TF32 (cuBLAS; a factor good to about 1e-3, for mixed precision's
      refinement); "bf16x9": float32 products emulated with BF16 (cuSOLVERMp, cusolverDn and
      cuBLAS: float32 accuracy); "fixed-point": float64 products emulated in fixed point
      (the same libraries: float64 accuracy); "bf16x9+fixed-point": both. The libraries run
      natively where the GPU has no such emulation.

    - eig_q2: "fused": the back-transformation by the bulge chase's reflectors applies each
      block in one pass over the eigenvectors (float64 on the GPU's tensor cores; over BLAS on
      CPUs) instead of three matrix products ("auto"); correct, slower as it stands.

    Tuning of the two-stage eigensolver:

    - eig_band: the widest band tried (0: the measured default, 128 with eigenvectors for
      float64 and complex64 from N = 16384 on GPUs, otherwise 64; the widest divisor of the tile
      up to it is used; at most 128, 64 for complex128 on GPUs).
    - eig_q2_group: sweeps per block of Q₂'s back-transformation on GPUs (0: the band's width,
      at most 64).
    - eig_q1_width: columns of the band reduction's panels joined in Q₁ on GPUs (0: the tile).

    Warnings (read in Python, not by the engines):

    - replicated_warning_bytes: a routine handed a matrix held whole on every device of a mesh
      of several (replicated) that is larger than this many bytes warns, with a
      `jaxmg.ReplicatedMatrixWarning`, before any work (default 1 GiB; 0: never).
    """

    cpu_lu: str = _choice("scalapack", doc="LU factorization on CPUs")
    cpu_cholesky: str = _choice("blocked", doc="Cholesky factorization on CPUs")
    cpu_qr: str = _choice("scalapack", doc="QR factorization on CPUs")
    cpu_inverses: str = _choice("blocked", "scalapack", doc="potri's and inv's inverse on CPUs")
    cpu_eigh: str = _choice("two-stage", "scalapack", doc="the eigensolver on CPUs")
    gpu_lu: str = _choice("cusolvermp", doc="LU factorization on GPUs")
    gpu_cholesky: str = _choice("blocked", doc="Cholesky factorization on GPUs")
    gpu_qr: str = _choice("cusolvermp", doc="QR factorization on GPUs")
    gpu_eigh: str = _choice("two-stage", "cusolvermp", doc="the eigensolver with vectors on GPUs")
    gpu_eigvals: str = _choice("two-stage", "cusolvermp", doc="the eigenvalues alone on GPUs")
    gpu_one_device: str = _choice("cusolvermp", doc="the library on one GPU")
    eig_q2: str = _choice("fused", doc="the two-stage eigensolver's Q₂ waves")
    gpu_math: str = _choice(
        "tf32", "bf16x9", "fixed-point", "bf16x9+fixed-point", doc="GPU products on tensor cores"
    )
    eig_band: int = _count(0, 0, doc="the two-stage eigensolver's widest band (0: measured)")
    eig_q2_group: int = _count(0, 0, doc="sweeps per Q₂ block (0: min(band, 64))")
    eig_q1_width: int = _count(0, 0, doc="columns joined in Q₁ (0: the tile)")
    replicated_warning_bytes: int = _count(
        1 << 30, 0, doc="warn above this size of a replicated matrix (0: never)", engine=False
    )
    # Test hooks (jaxmg._core.testing.hooks).
    rows_per_chunk: int = _hook(0, "rows a gathering step takes at a time (0: by bytes)")
    test_fail: str = _hook("", "<algorithm>:<rank>:<step>: an injected failure there")
    redistribute: bool = _hook(False, "redistribute on every mesh", engine=False)

    def __post_init__(self):
        for f in dataclasses.fields(self):
            _check(f, getattr(self, f.name))


_FIELDS = {f.name: f for f in dataclasses.fields(Config)}
PUBLIC = tuple(name for name, f in _FIELDS.items() if f.metadata["kind"] != "hook")
HOOKS = tuple(name for name, f in _FIELDS.items() if f.metadata["kind"] == "hook")

# Switches that only served finished experiments: no longer read (their measured values stay).
_RETIRED = {
    "JAXMG_EIG_Q2_ROWS": "Q₂'s products are always Wᴴ = Zᴴ V (measured faster)",
    "JAXMG_QR_PANEL": "the 1-D QR's panels are always factored 256 columns at a time (measured)",
    "JAXMG_TEST_FAIL": "a test hook now: jaxmg._core.testing.hooks(test_fail=...)",
    "JAXMG_ROWS_PER_CHUNK": "a test hook now: jaxmg._core.testing.hooks(rows_per_chunk=...)",
    "JAXMG_REDISTRIBUTE": "a test hook now: jaxmg._core.testing.hooks(redistribute=True)",
}


def env_name(name: str) -> str:
    """The environment variable that gives field `name` its default."""
    return "JAXMG_" + name.upper()


def _check(f: dataclasses.Field, value):
    """Raises ValueError (TypeError for a wrong type) naming the field and what it takes."""
    kind = f.metadata["kind"]
    if kind == "choice":
        values = f.metadata["values"]
        if value not in values:
            raise ValueError(
                f"{f.name} must be one of {', '.join(map(repr, values))}, not {value!r}"
            )
    elif f.type == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{f.name} must be an int, not {type(value).__name__}")
        lowest = f.metadata.get("lowest", 0)
        if value < lowest:
            raise ValueError(f"{f.name} must be at least {lowest}, not {value}")
    elif f.name == "test_fail":
        if not isinstance(value, str):
            raise TypeError(f"test_fail must be a str, not {type(value).__name__}")
        parts = value.split(":")
        if value and (len(parts) != 3 or not parts[0] or not all(_is_int(p) for p in parts[1:])):
            raise ValueError(f"test_fail must be '<algorithm>:<rank>:<step>', not {value!r}")
        if len(value) >= 48:  # csrc/common/config.h Config::test_fail
            raise ValueError(f"test_fail must be shorter than 48 characters, not {value!r}")
    elif not isinstance(value, bool):
        raise TypeError(f"{f.name} must be a bool, not {type(value).__name__}")


def _is_int(s: str) -> bool:
    return s.lstrip("-").isdigit()


def _convert(name: str, value):
    """value for field `name`: choices lower-cased, ints as Python ints."""
    f = _FIELDS[name]
    if f.metadata["kind"] == "choice" and isinstance(value, str):
        return value.strip().lower()
    if f.type == "int" and not isinstance(value, bool | str):
        try:
            return operator.index(value)  # NumPy integers too
        except TypeError:
            return value
    return value


def _from_environment(environ: Mapping[str, str]) -> Config:
    """The defaults the environment gives (unset or empty: the field's default)."""
    for variable, why in _RETIRED.items():
        if environ.get(variable):
            warnings.warn(f"jaxmg no longer reads {variable}: {why}; unset it", stacklevel=4)
    values = {}
    for name in PUBLIC:
        variable, f = env_name(name), _FIELDS[name]
        raw = environ.get(variable, "").strip()
        if not raw:
            continue
        try:
            value = _convert(name, int(raw) if f.metadata["kind"] == "count" else raw)
            _check(f, value)
        except (TypeError, ValueError) as e:
            what = str(e)
            if f.metadata["kind"] == "count" and not _is_int(raw):
                what = f"{name} must be an integer"
            raise ValueError(
                f"environment variable {variable}={raw!r}: {what}; set {variable} to a value it "
                f"takes, or unset it for the default ({f.default!r})"
            ) from None
        values[name] = value
    return Config(**values)


_lock = threading.Lock()
_defaults: Config | None = None  # from the environment, at first use
_global: Config | None = None  # the defaults with jaxmg.config.update's changes
_local = threading.local()  # .overrides: this thread's stack of override() dicts, merged


def _base() -> Config:
    global _defaults, _global
    if _global is None:
        with _lock:
            if _global is None:
                _defaults = _from_environment(os.environ)
                call_timeout_s(), bootstrap()  # their errors at first use too
                _global = _defaults
    return _global


def current() -> Config:
    """The configuration in effect on this thread: the global one (environment defaults and
    jaxmg.config.update's changes) with this thread's overrides."""
    base = _base()
    merged = getattr(_local, "merged", None)
    return dataclasses.replace(base, **merged) if merged else base


def _validated(values: Mapping[str, object], allowed: tuple[str, ...], where: str) -> dict:
    out = {}
    for name, value in values.items():
        if name not in _FIELDS:
            raise ValueError(
                f"{where}: jaxmg has no configuration option {name!r}; the options are "
                f"{', '.join(PUBLIC)}"
            )
        if name not in allowed:
            raise ValueError(
                f"{where}: {name} is a test hook; set it with jaxmg._core.testing.hooks"
            )
        value = _convert(name, value)
        try:
            _check(_FIELDS[name], value)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{where}: {e}") from None
        out[name] = value
    return out


@contextlib.contextmanager
def _override(values: Mapping[str, object], allowed: tuple[str, ...], where: str) -> Iterator:
    changes = _validated(values, allowed, where)
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(changes)
    _local.merged = {k: v for d in stack for k, v in d.items()}
    try:
        yield
    finally:
        stack.pop()
        _local.merged = {k: v for d in stack for k, v in d.items()}


class Settings:
    """`jaxmg.config`: the engines' algorithm choices and tuning, in the spirit of `jax.config`.

    Each option's default comes from the environment variable of its name in capitals with
    JAXMG_ in front (`cpu_eigh`: JAXMG_CPU_EIGH), read once, at the first jaxmg call (or the
    first read of `jaxmg.config`); unset, the engine's measured choice ("auto"). The options are
    `Config`'s fields. Read one as an attribute (`jaxmg.config.cpu_eigh`).

    A call uses the configuration in effect when it is built: jaxmg compiles a call again when
    the configuration changes, but a function you jit yourself keeps the configuration it was
    traced with. Every process of a call must use the same configuration; one that differs is
    the call agreement's error on every process.
    """

    def update(self, name: str, value) -> None:
        """Sets option `name` for every thread from now on (jaxmg.config.update("cpu_eigh",
        "two-stage")); raises ValueError naming the option and its values for a bad one."""
        global _global
        changes = _validated({name: value}, PUBLIC, "jaxmg.config.update")
        base = _base()
        with _lock:
            _global = dataclasses.replace(_global or base, **changes)

    def override(self, **values):
        """A context manager that sets options on this thread inside its block:
        `with jaxmg.config.override(cpu_eigh="scalapack"): ...`."""
        return _override(values, PUBLIC, "jaxmg.config.override")

    def reset(self) -> None:
        """Every option back to its default from the environment (as read at first use)."""
        global _global
        _base()
        with _lock:
            _global = _defaults

    def current(self) -> Config:
        """The configuration in effect on this thread (a frozen `Config`)."""
        return current()

    def __getattr__(self, name: str):
        if name in PUBLIC:
            return getattr(current(), name)
        raise AttributeError(f"jaxmg.config has no option {name!r}; the options are {PUBLIC}")

    def __dir__(self):
        return [*super().__dir__(), *PUBLIC]

    def __repr__(self) -> str:
        c = current()
        return "jaxmg.config(" + ", ".join(f"{n}={getattr(c, n)!r}" for n in PUBLIC) + ")"


config = Settings()


@functools.cache
def engine_attribute(c: Config) -> dict:
    """The call's `config` attribute (csrc/ffi/config.h): every field the engines read, the
    choices as csrc/common/config.h's Choice codes."""
    out = {}
    for name, f in _FIELDS.items():
        if not f.metadata.get("engine", True):
            continue
        value = getattr(c, name)
        if f.metadata["kind"] == "choice":
            value = _CHOICE_CODES[value]
        out[name] = value if isinstance(value, str) else np.int64(value)
    return out


# Process settings: environment-only, each read once.


@functools.cache
def call_timeout_s() -> float:
    """JAXMG_CALL_TIMEOUT (seconds, default 600): how long a process waits for the others of a
    mesh (in Python's bootstrap here, in the engines' call agreement there)."""
    raw = os.environ.get("JAXMG_CALL_TIMEOUT", "").strip()
    if not raw:
        return 600.0
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(
            f"environment variable JAXMG_CALL_TIMEOUT={raw!r}: it must be a positive number of "
            "seconds; set it to one, or unset it (default 600)"
        )
    return value


@functools.cache
def bootstrap() -> str:
    """JAXMG_BOOTSTRAP: how processes share bytes before a collective (jaxmg/_core/comm.py):
    "auto" (jax.distributed's key-value store, else mpi4py), "kv" or "mpi"."""
    raw = os.environ.get("JAXMG_BOOTSTRAP", "").strip().lower() or "auto"
    if raw not in ("auto", "kv", "mpi"):
        raise ValueError(
            f"environment variable JAXMG_BOOTSTRAP={raw!r}: it must be 'auto', 'kv' or 'mpi'; "
            "set it to one, or unset it"
        )
    return raw


@functools.cache
def library_dir() -> str | None:
    """JAXMG_LIB_DIR: a folder searched first for the native libraries (None: unset)."""
    return os.environ.get("JAXMG_LIB_DIR") or None
