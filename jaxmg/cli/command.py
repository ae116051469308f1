"""The subcommands of `python -m jaxmg`, and one of them parsed and run on its own (its module's
`main`, e.g. `jaxmg.cli.launch.main(argv)`), with the same parser, help and exit statuses as
through `python -m jaxmg`. A leaf module: the subcommands import it, it imports none of them."""

from __future__ import annotations

import argparse
from collections.abc import Callable

COMMANDS = {
    "launch": "run N processes, one per device (srun in a Slurm allocation, else mpirun)",
    "info": "print versions, native libraries, engines, devices and MPI",
    "demo": "solve a distributed SPD system with jaxmg.potrs in N processes, check and time it",
    "bench": "time a routine against JAX on one device; write JSON, a table and a plot",
}


def add(
    p: argparse.ArgumentParser,
    configure: Callable[[argparse.ArgumentParser], object],
    run_namespace: Callable[[argparse.Namespace], int],
) -> argparse.ArgumentParser:
    """Gives `p` a subcommand's options; its namespace carries ``run`` (run_namespace) and
    ``parser`` (p, for its usage errors)."""
    configure(p)
    p.set_defaults(run=run_namespace, parser=p)
    return p


def exit_status(fn: Callable[[], int]) -> int:
    """fn()'s status; a parser's exit (--help: 0, a usage error: 2, already reported) as its
    code."""
    try:
        return fn()
    except SystemExit as e:
        return int(e.code or 0)


def run(
    name: str,
    configure: Callable[[argparse.ArgumentParser], object],
    run_namespace: Callable[[argparse.Namespace], int],
    argv: list[str],
) -> int:
    """`python -m jaxmg NAME ARGV`, parsed by the subcommand's own parser."""
    p = argparse.ArgumentParser(
        prog=f"python -m jaxmg {name}", description=COMMANDS[name], allow_abbrev=True
    )
    add(p, configure, run_namespace)

    def go():
        ns = p.parse_args(argv)
        return ns.run(ns)

    return exit_status(go)
