"""Command line: `python -m jaxmg {launch,info,demo}`."""

from __future__ import annotations

import sys

USAGE = """\
usage: python -m jaxmg <command> [options]

commands:
  launch -n N [--timeout S] [--] script.py [args...]
                run N processes of this Python under mpirun (Open MPI), one per device, so
                that jax.distributed.initialize() works with no arguments
  launch -n N [--timeout S] -m module [args...]
                the same for a module
  info          print versions, native libraries, devices and MPI: what to check first
  bench [-n N] [--sizes N1,N2] [--dtypes float64,float32] [--tile T] [--out F.json]
                time potrs on the devices present and JAX's cho_factor + cho_solve on one
                device; print a table, write JSON and a plot
  demo [-n N] [--size N] [--dtype float64|float32] [--tile T] [--timeout S]
                solve a distributed SPD system with jaxmg.potrs in N processes, check and time it

`python -m jaxmg <command> --help` describes a command's options.
"""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "--version":
        from jaxmg import __version__

        print(f"jaxmg {__version__}")
        return 0
    if command == "launch":
        from jaxmg.cli import launch as _launch

        return _launch.main(rest)
    if command == "info":
        from jaxmg.cli import info as _info

        return _info.main(rest)
    if command == "bench":
        from jaxmg.cli import bench as _bench

        return _bench.cli(rest)
    if command == "demo":
        from jaxmg.cli import demo as _demo

        return _demo.cli(rest)
    print(f"jaxmg: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
