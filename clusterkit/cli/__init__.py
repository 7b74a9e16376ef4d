"""The ``clusterkit`` command line. Each subcommand lives in its own module with
``add_parser(subparsers)`` and ``main(args) -> int``; ``-v``/``-q`` (before or after the
subcommand) set the level of the messages on stderr (:mod:`clusterkit.cli.logs`)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from clusterkit.cli.logs import add_verbosity_args, configure_logging, verbosity
from clusterkit.errors import ClusterkitError

COMMANDS = ["partition", "run", "export", "compare", "report", "selectors", "verify"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clusterkit", description="Cluster the operator graph "
                                     "of a neural network into subgraphs an accelerator can run.")
    add_verbosity_args(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"clusterkit.cli.{name}_cmd")
        except ModuleNotFoundError as exc:
            if exc.name == f"clusterkit.cli.{name}_cmd":
                continue
            raise
        p = module.add_parser(sub)
        add_verbosity_args(p, suffix="_sub")
        p.set_defaults(_main=module.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script and of ``python -m clusterkit``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(verbosity(args))
    try:
        return int(args._main(args) or 0)
    except ClusterkitError as exc:
        print(f"clusterkit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("clusterkit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (``clusterkit ... | head``): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
