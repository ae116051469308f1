"""The routine factory: one declaration per routine gives its public function, its per-block
form, its JAXMg-1.x context form and its derivative rule (as JAX's `linalg_primitive` gives a
primitive's rules from one declaration).

A routine module declares `Routine(Declaration(...))` and writes its public signatures and
docstrings, whose bodies pass their arguments by name (`return API.public(a=a, b=b, ...)`); the
factory owns what every routine repeats: the flag checks, the operand checks, the placement
keywords (T_A, mesh, matrix_specs, in_specs, pad, donate), the derivative rule's static
options, the call on blocks or in the caller's jit, the outputs' shardings (x in b's own
sharding, matrices replicated when a is) and the return structure. What stays in the module is
its own: which engine routine runs, how a call's `Result` gives its outputs, and its
derivative's mathematics.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from jaxmg._core import placement as _placement
from jaxmg._core import routine as _routine
from jaxmg._core import rules as _rules

# The boolean flags of the public signatures, checked where a form takes them (TypeError naming
# the flag otherwise), in the order of the signature.
FLAGS = (
    "return_eigenvectors",
    "compute_u",
    "compute_vh",
    "compute_h",
    "full_matrices",
    "lower",
    "unit_diagonal",
    "return_logdet",
    "return_status",
    "pad",
    "donate",
    "check_symmetry",
)
# The keywords every routine takes for its placement.
PLACEMENT = ("T_A", "mesh", "matrix_specs", "in_specs")


@dataclass(frozen=True)
class Output:
    """One output of a routine, in the order returned.

    flag: the keyword that returns it (None: always returned).
    place: "rhs": in b's own sharding where it is known (a replicated b gives a replicated
      output); "replicated": replicated when a is known to be (as JAXMg returns matrices);
      None: as the routine gives it.
    optional: computed only when its flag is set (eigenvectors); else always computed, and
      returned with the flag (a log-determinant, a status).
    status: returned by a form that does not take its flag (the status of the context forms,
      which always return it).
    context: returned by the context form alone, made there by the routine's `around`
      (least_squares's b_work); never computed by the engine call or the derivative rule.
    """

    name: str
    flag: str | None = None
    place: str | None = None
    optional: bool = False
    status: bool = False
    context: bool = False


# A solve's outputs: x (in b's own sharding where it is known), log det A (log |det A|) and the
# status.
SOLVE_OUTPUTS = (
    Output("x", place="rhs"),
    Output("logdet", "return_logdet"),
    Output("status", "return_status", status=True),
)


def _check_symmetry(kw) -> dict:
    """The keywords of `routine.call` from a call's: check_symmetry, where the routine takes it."""
    return {"check_symmetry": kw["check_symmetry"]} if "check_symmetry" in kw else {}


@dataclass(frozen=True)
class Alias:
    """A routine's `jaxmg.linalg` function: JAX's name, signature and docstring are written in
    jaxmg/linalg.py, whose body passes its arguments by name (`return API.linalg(a=a, ...)`);
    this says how they map onto the routine.

    function: the routine's public function, called once per matrix of a stack.
    keywords(args) -> its keywords from JAX's arguments (raising ValueError for a value JAX
      refuses; JAX's arguments that mean nothing here are dropped), besides the placement
      keywords T_A, mesh, matrix_specs and pad, which pass as they are.
    result(out, args) -> JAX's return (a NamedTuple...) from the routine's.
    operands: the arguments after a that are arrays: mapped over a stack's leading dimensions
      with a, or shared by every matrix where they are vectors (one right-hand side).
    """

    function: Callable
    keywords: Callable = lambda args: {}
    result: Callable = lambda out, args: out
    operands: tuple[str, ...] = ()


@dataclass(frozen=True)
class Declaration:
    """What a routine declares.

    routine: the engine's routine (`routine.EngineRoutine`), or a function of the keywords
      giving it (syevd's with or without eigenvectors).
    outputs: the outputs (`Output`), in the order returned, the status last.
    unpack(r, kw, b) -> the computed outputs, in order, from a call's `routine.Result` (kw: the
      keywords, with the variants and those made by `check`).
    keywords: the routine's own boolean keywords, static options of its derivative rule and of
      its call (check_symmetry, lower, ...).
    variants: the keywords that change what is computed (one rule each); they are not options.
    solve_rule: a solve routine's derivative (`rules.SolveRule` without its primal, which the
      factory gives): x and log det through one factorization; logdet's derivative only with
      return_logdet.
    tangent(variant, opts, placement, primals, outputs, tangents): otherwise, the outputs'
      tangents (`rules.differentiable`); variant: the variants' values by name.
    check(kw) -> converted keywords: the routine's own argument checks, before the operands'.
    check_operands: check a's and b's shapes and dtypes as given, before a transformation
      converts them (`routine.check_operands`).
    context_work: the context form returns the work array first (False: an output takes a's
      place, as qr's Q).
    context_replicated: the context form returns the outputs placed "replicated" replicated
      also where a's mesh axes are Explicit (qr's Q and R, polar's Up and H): there the
      sharding is part of the type, and JAX's operators refuse Qᴴ Q (contracting sharded
      rows) or diag(R) on sharded operands, which JAXMg's context examples compute.
    linalg: the routine under its `jax.numpy.linalg` / `jax.scipy.linalg` name (`Alias`).
    """

    routine: _routine.EngineRoutine | Callable
    outputs: tuple[Output, ...]
    unpack: Callable
    keywords: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    solve_rule: _rules.SolveRule | None = None
    tangent: Callable | None = None
    check: Callable | None = None
    check_operands: bool = True
    context_work: bool = True
    context_replicated: bool = False
    linalg: Alias | None = None


class Routine:
    """The forms of one declared routine; each takes every argument of its public signature,
    by name. A routine that is more than its engine call subclasses it in its own module and
    overrides `primal` (what its derivative rule computes) or `around` (a reduction in every
    form), as gesvd and least_squares do."""

    def __init__(self, declaration: Declaration):
        self.d = declaration
        self._rule = functools.cache(self._make_rule)
        self._reduces = type(self).around is not Routine.around

    def around(self, args: Mapping):
        """(args, finish): the arguments the routine runs on, and finish(outputs) -> the
        outputs for the arguments given (a dict by name; the context form's work array under
        "work"), placed for them. Runs outside the derivative rule, with a's mesh as the
        context mesh, in every form. Default: the arguments as given."""
        return args, lambda outputs: outputs

    # The forms.

    def public(self, **args):
        """The routine on the global arrays, differentiable, inside or outside jit."""
        d = self.d
        _placement.check_flags(**_flags(args))
        _placement.warn_if_replicated(a=args["a"], b=args.get("b"))
        own = dict(d.check(args)) if d.check else {}
        with self._scope(args):
            given, (args, finish) = args, self.around(args)
            a, b, arrays = _arrays(args)
            if d.check_operands:
                _routine.check_operands(*arrays)
            opts = _rules.options(
                **{k: args[k] for k in PLACEMENT},
                pad=bool(args["pad"]),
                **{k: bool(args[k]) for k in d.keywords},
                **own,
            )
            variant = tuple(bool(args[k]) for k in d.variants)
            out = self._rule(variant)(opts, bool(args.get("donate", False)), *arrays)
            outputs = finish(dict(zip(self._computed(variant), out, strict=True)))
            return self._returned(outputs, given, _placer(given))

    def blocks(self, **args):
        """The routine on this device's blocks inside the caller's shard_map (not
        differentiable; the outputs are blocks, as the engine leaves them)."""
        _placement.check_flags(**_flags(args))
        kw = {**args, **(self.d.check(args) if self.d.check else {})}
        r = self._call(kw, blocks=True)
        outputs = self._unpacked(r, kw)
        return self._returned(outputs, args, lambda m, how: m)

    def context(self, **args):
        """JAXMg 1.x's context form: the global arrays inside the caller's jit (no jit of
        jaxmg's own, a taken as it lies); (the work array in a's shape and sharding, the
        outputs...), without the work array where an output takes its place. Inside the
        caller's shard_map, on this device's blocks (`_context_blocks`)."""
        d = self.d
        _placement.check_flags(**_flags(args))
        if _placement.manual_mesh() is not None:
            return self._context_blocks(args)
        _placement.warn_if_replicated(a=args["a"], b=args.get("b"))
        own = dict(d.check(args)) if d.check else {}
        given, (args, finish) = args, self.around(args)
        kw = {**args, **own}
        if d.check_operands:
            _routine.check_operands(*_arrays(args)[2])
        r = self._call(kw, ctx=True)
        outputs = finish({**self._unpacked(r, kw), "work": r.matrix})
        work = outputs.pop("work")
        place = _placer(given, r.user, explicit_replicated=d.context_replicated)
        out = self._returned(outputs, given, place)
        if not d.context_work:
            return out
        return (work,) + (out if isinstance(out, tuple) else (out,))

    def _context_blocks(self, args: Mapping):
        """The context form inside the caller's `jax.shard_map`, as JAXMg's later
        `potrs_shardmap_ctx` is called: a and b are this device's blocks (a sharded as
        `matrix_specs` over the shard_map's mesh, b's rows like a's), the checks those of the
        global arrays the blocks make up, and the results blocks too, as the per-block form
        gives them: (the work array's block, the outputs...), the status an int32 vector of
        one element, the same on every device (an out_spec over the mesh's axes concatenates
        one per device, as JAXMg's per-device status vectors; P() gives one). mesh= defaults
        to the shard_map's (the context mesh)."""
        d = self.d
        kw = {**args, **(d.check(args) if d.check else {})}
        if kw.get("mesh") is None:
            kw["mesh"] = _placement.manual_mesh()
        r = self._call(kw, blocks=True)
        outputs = self._unpacked(r, kw)
        for o in d.outputs:
            if o.status and o.name in outputs:
                outputs[o.name] = outputs[o.name].reshape(1)
        out = self._returned(outputs, args, lambda m, how: m)
        if not d.context_work:
            return out
        return (r.matrix,) + (out if isinstance(out, tuple) else (out,))

    def primal(self, kw: Mapping, donate, a, b=None):
        """The routine's computation, as its derivative rule sees it: the computed outputs
        with the keywords kw (options and variants) on (a, b). Default: the engine call (the
        context form always takes it)."""
        return self.engine(kw, donate, a, b)

    def engine(self, kw: Mapping, donate, a, b=None):
        """The computed outputs of the engine's call (`routine.call`) with the keywords kw on
        (a, b)."""
        kw = {**kw, "a": a, "b": b}
        return tuple(self._unpacked(self._call(kw, donate=donate), kw).values())

    def differentiable(self, **variant):
        """fn(opts, donate, *arrays) -> the computed outputs of the variant given by name
        (every variant keyword), with the derivative rule."""
        return self._rule(tuple(bool(variant[k]) for k in self.d.variants))

    def linalg(self, **args):
        """The routine under its `jaxmg.linalg` name, on JAX's arguments (by name):
        `a` (..., M, N) and its operands, one call per matrix of a stack."""
        alias = self.d.linalg
        a = args["a"]
        check_matrix(a)
        kw = {k: args[k] for k in ("T_A", "mesh", "matrix_specs", "pad")}
        kw.update(alias.keywords(args))
        shared = {k: args[k] for k in alias.operands if getattr(args[k], "ndim", 0) == 1}
        mapped = [k for k in alias.operands if k not in shared]

        def one(m, *rest):
            out = alias.function(m, **shared, **dict(zip(mapped, rest, strict=True)), **kw)
            return alias.result(out, args)

        return batched(one, a, *(args[k] for k in mapped))

    # The pieces.

    def _scope(self, args: Mapping):
        """a's mesh as the context mesh around a reduction (`around`), whose own operations
        run outside the derivative rule's scope."""
        if not self._reduces:
            return contextlib.nullcontext()
        return _placement.scope_of(args["a"], args.get("mesh"))

    def _call(self, kw, **how):
        routine = self.d.routine
        if callable(routine):
            routine = routine(kw)
        return _routine.call(
            routine,
            kw["a"],
            kw.get("b"),
            **{k: kw.get(k) for k in PLACEMENT},
            pad=kw.get("pad", True),
            **_check_symmetry(kw),
            **({"subset": kw["subset"]} if kw.get("subset") else {}),
            **how,
        )

    def _unpacked(self, r, kw) -> dict:
        variant = tuple(bool(kw.get(k, False)) for k in self.d.variants)
        out = self.d.unpack(r, kw, kw.get("b"))
        return dict(zip(self._computed(variant), out, strict=True))

    def _computed(self, variant) -> tuple[str, ...]:
        on = dict(zip(self.d.variants, variant, strict=True))
        return tuple(
            o.name
            for o in self.d.outputs
            if not o.context and (not o.optional or on.get(o.flag, True))
        )

    def _returned(self, outputs: dict, args: Mapping, place):
        out = tuple(
            place(outputs[o.name], o.place)
            for o in self.d.outputs
            if o.name in outputs
            and (o.flag is None or (args[o.flag] if o.flag in args else o.status))
        )
        return out[0] if len(out) == 1 else out

    def _make_rule(self, variant: tuple):
        d = self.d
        names = dict(zip(d.variants, variant, strict=True))
        if d.solve_rule is not None:
            rule = replace(
                d.solve_rule,
                primal=lambda a, b, donate, **kw: tuple(self.primal({**kw, **names}, donate, a, b)),
            )
            return _rules.differentiable_solve(rule, names.get("return_logdet", False))

        def primal(opts, donate, *arrays):
            return tuple(self.primal({**opts.kwargs(), **names}, donate, *arrays))

        return _rules.differentiable(primal, functools.partial(d.tangent, names))


def _flags(args: Mapping) -> dict:
    return {k: args[k] for k in args if k in FLAGS}


def _arrays(args: Mapping):
    a, b = args["a"], args.get("b")
    return a, b, ((a, b) if "b" in args else (a,))


def _placer(args: Mapping, placement=None, explicit_replicated=False):
    """place(m, how): an output placed for the arguments given (placement: a's, found when
    first needed unless given; explicit_replicated: "replicated" outputs replicated on
    Explicit mesh axes too, `Declaration.context_replicated`)."""
    a, b = args["a"], args.get("b")

    @functools.cache
    def found():
        if placement is not None:
            return placement
        spec = _routine._matrix_spec(args["matrix_specs"], args["in_specs"])
        return _placement.resolve_placement(a, args["mesh"], spec)

    return lambda m, how: _place(m, how, a, b, found, explicit_replicated)


def _place(m, how, a, b, placement, explicit_replicated=False):
    """An output placed as its declaration says (placement: a's, when needed)."""
    if how == "rhs" and _placement.known_spec(b) is not None:
        return _placement.place_like(m, b, placement().mesh)
    if how == "replicated" and (
        _placement.known_replicated(a)
        or (explicit_replicated and _placement.explicit_axes(placement()))
    ):
        return _placement.constrain(m, placement().mesh, P())
    return m


def check_matrix(a, what="a"):
    """A ValueError unless `a` is a matrix or a stack of matrices."""
    if getattr(a, "ndim", 0) < 2:
        shape = tuple(getattr(a, "shape", ()))
        raise ValueError(f"{what} must be a matrix or a stack of matrices, got shape {shape}")


def batched(fn, a, *rest):
    """fn over the leading dimensions of a (and of the matching arrays in rest), stacked."""
    if a.ndim == 2:
        return fn(a, *rest)
    outs = [batched(fn, a[i], *(r[i] for r in rest)) for i in range(a.shape[0])]
    if isinstance(outs[0], tuple):
        parts = [jnp.stack(p) for p in zip(*outs, strict=True)]
        return type(outs[0])(*parts) if hasattr(outs[0], "_fields") else tuple(parts)
    return jnp.stack(outs)
