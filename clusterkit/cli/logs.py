"""Messages for people through :mod:`logging`: the command line configures the ``clusterkit``
logger once, from ``-v``/``-q``; library modules only ever call ``logging.getLogger(__name__)``.

Results (summaries, tables) go to stdout; messages (``wrote FILE``, timings, warnings) go to
stderr, so that ``clusterkit ... > out.txt`` keeps only the results. Errors are not logged: they
stay the one ``clusterkit: error: ...`` line of :func:`clusterkit.cli.main`, whatever ``-q``.
"""

from __future__ import annotations

import argparse
import logging
import sys

#: the logger every clusterkit module's logger descends from
ROOT = "clusterkit"


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is when the record is emitted (a test's capture, a
    redirection set after configuration)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # logging must never be the reason a command fails
            self.handleError(record)


class _Formatter(logging.Formatter):
    """``wrote FILE`` for information, ``clusterkit: warning: ...`` for warnings,
    ``debug: clusterkit.api: ...`` for debugging."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info and record.levelno >= logging.WARNING:
            text += "\n" + self.formatException(record.exc_info)
        if record.levelno >= logging.WARNING:
            return f"clusterkit: {record.levelname.lower()}: {text}"
        if record.levelno < logging.INFO:
            return f"debug: {record.name}: {text}"
        return text


_HANDLER = _StderrHandler()
_HANDLER.setFormatter(_Formatter())


def add_verbosity_args(p: argparse.ArgumentParser, suffix: str = "") -> None:
    """``-v/--verbose`` (repeatable) and ``-q/--quiet`` (repeatable); ``suffix`` keeps the
    counts given after a subcommand apart from those given before it."""
    p.add_argument("-v", "--verbose", action="count", default=0, dest=f"verbose{suffix}",
                   help="more messages on stderr: -v adds debugging details")
    p.add_argument("-q", "--quiet", action="count", default=0, dest=f"quiet{suffix}",
                   help="fewer messages on stderr: -q keeps warnings, -qq errors only")


def verbosity(args: argparse.Namespace) -> int:
    """The sum of ``-v`` minus ``-q`` given before and after the subcommand."""
    return (getattr(args, "verbose", 0) + getattr(args, "verbose_sub", 0)
            - getattr(args, "quiet", 0) - getattr(args, "quiet_sub", 0))


def level_for(count: int) -> int:
    """The logging level for a verbosity: 0 information, 1 and more debugging, -1 warnings,
    -2 and less errors only."""
    if count >= 1:
        return logging.DEBUG
    if count == 0:
        return logging.INFO
    return logging.WARNING if count == -1 else logging.ERROR


def configure_logging(count: int) -> None:
    """Send the ``clusterkit`` logger's messages at :func:`level_for` ``count`` and above to
    stderr; calling it again replaces the previous setting (tests run many commands)."""
    logger = logging.getLogger(ROOT)
    logger.setLevel(level_for(count))
    _HANDLER.setLevel(level_for(count))
    if _HANDLER not in logger.handlers:
        logger.addHandler(_HANDLER)
