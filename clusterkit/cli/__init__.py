"""The ``clusterkit`` command line. Each subcommand lives in its own module with
``add_parser(subparsers)`` and ``main(args) -> int``; ``-v``/``-q`` (before or after the
subcommand) set the level of the messages on stderr (:mod:`clusterkit.cli.logs`)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import NoReturn

from clusterkit.cli.logs import add_verbosity_args, configure_logging, verbosity
from clusterkit.errors import ClusterkitError, UsageError

COMMANDS = ["partition", "run", "export", "compare", "report", "selectors", "check-selector",
            "verify", "profile", "placement-instance"]


class Parser(argparse.ArgumentParser):
    """argparse whose errors are a :class:`UsageError` naming the (sub)command's usage hint,
    which :func:`main` prints as the one line ``clusterkit: error: ...`` (exit 2)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.prog)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="clusterkit", description="Cluster the operator graph of a neural "
                    "network into subgraphs an accelerator can run.")
    add_verbosity_args(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        module_name = f"clusterkit.cli.{name.replace('-', '_')}_cmd"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        p = module.add_parser(sub)
        add_verbosity_args(p, suffix="_sub")
        p.set_defaults(_main=module.main, _prog=p.prog)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script and of ``python -m clusterkit``."""
    try:
        args = parse_args(build_parser(), argv)
        configure_logging(verbosity(args))
        return int(args._main(args) or 0)
    except ClusterkitError as exc:
        print(f"clusterkit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # a sweep says what it finished
        print("clusterkit: interrupted" + (f": {exc}" if str(exc) else ""), file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (``clusterkit ... | head``): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """The parsed command line; a flag the subcommand does not know is a :class:`UsageError`
    with that subcommand's usage hint (argparse would give the top-level one)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        raise UsageError(f"unrecognized arguments: {' '.join(extra)}",
                         getattr(args, "_prog", parser.prog))
    return args
