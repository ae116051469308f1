"""Benchmark of jaxmg.potrs against JAX on one device: `python bench/potrs.py [options]`.

The same as `python -m jaxmg bench` (see `--help`): it launches one process per device, times
potrs, then cho_factor + cho_solve on one device, prints a table and writes JSON and a plot.
"""

import sys

from jaxmg.cli.bench import cli

if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
