"""Command line: `python -m jaxmg {launch,info,demo,bench}`.

  launch  run N processes of this Python, one per device (srun inside a Slurm allocation,
          otherwise mpirun), so that jax.distributed.initialize() needs no arguments
  info    versions, native libraries, engines, devices and MPI: what to check first
  demo    a distributed Cholesky solve (jaxmg.potrs) in N processes, checked and timed
  bench   time a routine on the devices present against JAX on one device (and JAXMg 1.x)

`python -m jaxmg COMMAND --help` describes each command's options.
"""

from __future__ import annotations

import argparse
import sys

from jaxmg.cli.command import COMMANDS, add, exit_status


def build_parser() -> argparse.ArgumentParser:
    """The parser of `python -m jaxmg`, one subcommand per entry of COMMANDS.

    Returns:
        The parser; each subcommand's namespace carries ``run`` (a function of the namespace
        that returns the exit status) and ``parser`` (the subcommand's own parser).
    """
    from jaxmg.cli import bench, demo, info, launch

    p = argparse.ArgumentParser(
        prog="python -m jaxmg",
        description="jaxmg: distributed dense linear algebra for JAX.",
        epilog="`python -m jaxmg COMMAND --help` describes a command's options.",
    )
    p.add_argument("--version", action="store_true", help="print jaxmg's version and exit")
    sub = p.add_subparsers(dest="command", metavar="{" + ",".join(COMMANDS) + "}")
    for name, module in (("launch", launch), ("info", info), ("demo", demo), ("bench", bench)):
        sp = sub.add_parser(name, help=COMMANDS[name], description=COMMANDS[name])
        add(sp, module.configure, module.run_namespace)
    return p


def main(argv: list[str] | None = None) -> int:
    """Runs one command.

    Args:
        argv: The arguments after ``python -m jaxmg`` (default: ``sys.argv[1:]``).

    Returns:
        The command's exit status: 0 on success, 2 for a bad command line.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    p = build_parser()
    try:
        ns = p.parse_args(argv)
    except SystemExit as e:  # --help (0) or a usage error (2, already reported)
        return int(e.code or 0)
    if ns.version:
        from jaxmg import __version__

        print(f"jaxmg {__version__}")
        return 0
    if ns.command is None:
        p.print_help()
        return 2
    return exit_status(lambda: ns.run(ns))  # (a subcommand's parser.error: 2)


if __name__ == "__main__":
    sys.exit(main())
