"""Run one function call in its own child process, with an optional time limit.

A sweep over many models must survive one model that crashes the interpreter (a native library
aborting, ``os._exit``) or runs for ever: the call runs in a child process, its result comes
back through a pipe, and a child that dies or outlives ``timeout`` becomes an
:class:`~clusterkit.errors.ExecutionError` in the parent, which goes on.

The child is a :mod:`multiprocessing` process (the platform's default start method): with
``fork`` it sees everything registered in the parent; with ``spawn``/``forkserver`` only what it
imports. A daemonic process may not start such children, and a Dask worker is one: there the
child is a fresh interpreter instead (``python -c``, the call and its arguments pickled with
cloudpickle when it is installed), which sees only what it imports.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import subprocess
import sys
from typing import Any, Callable

from clusterkit.errors import ExecutionError

#: the code a fresh-interpreter child runs (see :func:`_serve`)
_SERVE = "from clusterkit.analysis.isolated import _serve; _serve()"


def _child(conn: Any, func: Callable[..., Any], args: tuple) -> None:
    conn.send(func(*args))
    conn.close()


def run_isolated(func: Callable[..., Any], args: tuple, timeout: float | None = None,
                 label: str = "task") -> Any:
    """``func(*args)`` computed in a child process; ``func`` and ``args`` must pickle.

    Raises :class:`ExecutionError` naming ``label`` when the child dies before answering (an
    exception in ``func`` included: the child prints its traceback and exits) or when it has not
    answered within ``timeout`` seconds (it is then killed)."""
    if multiprocessing.current_process().daemon:
        return _run_interpreter(func, args, timeout, label)
    ctx = multiprocessing.get_context()
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, func, args), daemon=True)
    proc.start()
    send.close()
    try:
        if not receive.poll(timeout):
            proc.kill()
            raise _timed_out(label, timeout)
        try:
            return receive.recv()
        except EOFError:
            proc.join()
            raise _died(label, proc.exitcode) from None
    finally:
        receive.close()
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()


def _timed_out(label: str, timeout: float | None) -> ExecutionError:
    return ExecutionError(f"{label} timed out after {timeout:g} s")


def _died(label: str, code: int | None) -> ExecutionError:
    return ExecutionError(f"{label}: its worker process died (exit code {code})")


def _run_interpreter(func: Callable[..., Any], args: tuple, timeout: float | None,
                     label: str) -> Any:
    """:func:`run_isolated` through a fresh interpreter: the call goes in on its stdin, the
    result comes back on its stdout (what the call itself prints goes to stderr)."""
    try:
        import cloudpickle as pickler  # pickles what plain pickle cannot (lambdas, __main__)
    except ImportError:  # pragma: no cover - cloudpickle comes with distributed
        pickler = pickle
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    try:
        done = subprocess.run([sys.executable, "-c", _SERVE], input=pickler.dumps((func, args)),
                              stdout=subprocess.PIPE, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise _timed_out(label, timeout) from None
    if done.returncode != 0 or not done.stdout:
        raise _died(label, done.returncode)
    return pickle.loads(done.stdout)


def _serve() -> None:
    """The fresh interpreter's side of :func:`_run_interpreter`."""
    result_fd = os.dup(1)
    os.dup2(2, 1)  # the call's own prints must not mix with the result
    func, args = pickle.load(sys.stdin.buffer)
    data = pickle.dumps(func(*args))
    with os.fdopen(result_fd, "wb") as out:
        out.write(data)
