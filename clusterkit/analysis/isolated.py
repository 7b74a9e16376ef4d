"""Run one function call in its own child process, with an optional time limit.

A sweep over many models must survive one model that crashes the interpreter (a native library
aborting, ``os._exit``) or runs for ever: the call runs in a child process (the platform's
default start method), its result comes back through a pipe, and a child that dies or outlives
``timeout`` becomes an :class:`~clusterkit.errors.ExecutionError` in the parent, which goes on.
With the ``fork`` start method the child sees everything registered in the parent; with
``spawn``/``forkserver`` only what it imports.
"""

from __future__ import annotations

import multiprocessing
from typing import Any, Callable

from clusterkit.errors import ExecutionError


def _child(conn: Any, func: Callable[..., Any], args: tuple) -> None:
    conn.send(func(*args))
    conn.close()


def run_isolated(func: Callable[..., Any], args: tuple, timeout: float | None = None,
                 label: str = "task") -> Any:
    """``func(*args)`` computed in a child process; ``func`` and ``args`` must pickle.

    Raises :class:`ExecutionError` naming ``label`` when the child dies before answering (an
    exception in ``func`` included: the child prints its traceback and exits) or when it has not
    answered within ``timeout`` seconds (it is then killed)."""
    ctx = multiprocessing.get_context()
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, func, args), daemon=True)
    proc.start()
    send.close()
    try:
        if not receive.poll(timeout):
            proc.kill()
            raise ExecutionError(f"{label} timed out after {timeout:g} s")
        try:
            return receive.recv()
        except EOFError:
            proc.join()
            raise ExecutionError(f"{label}: its worker process died (exit code {proc.exitcode})"
                                 ) from None
    finally:
        receive.close()
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()
