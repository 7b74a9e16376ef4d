"""Run one function call in its own child process, with an optional time limit.

A sweep over many models must survive one model that crashes the interpreter (a native library
aborting, ``os._exit``) or runs for ever: the call runs in a child process, its result comes
back through a pipe, and a child that dies or outlives ``timeout`` becomes an
:class:`~clusterkit.errors.ExecutionError` in the parent, which goes on.

Which child depends on the caller:

- from a process's main thread: a :mod:`multiprocessing` process of the platform's default start
  method (with ``fork`` it sees everything registered in the parent);
- from another thread (an executor's worker thread, as in a Dask worker), where forking the
  whole process is unsafe: a child of the ``forkserver`` (the call's module preloaded there, so a
  child starts in milliseconds), which sees only what it imports;
- from a daemonic process, which may not start multiprocessing children (a Dask worker is one
  unless started with ``distributed.worker.daemon`` false): a fresh interpreter (``python -c``),
  which sees only what it imports.

Except with ``fork``, the call and its arguments are pickled with cloudpickle when it is
installed (it comes with distributed), so a selector class defined in a script travels too.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import threading
from typing import Any, Callable

from clusterkit.errors import ExecutionError

#: what a fresh-interpreter child runs: the call comes in on stdin, its result goes out on the
#: original stdout, and what the call itself prints goes to stderr
_SERVE = """\
import os, pickle, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: subprocess.run kills us
out = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)
func, args = pickle.load(sys.stdin.buffer)
out.write(pickle.dumps(func(*args)))
out.close()
"""


def _child(conn: Any, func: Callable[..., Any], args: tuple) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it kills the child
    conn.send(func(*args))
    conn.close()


def _child_pickled(conn: Any, payload: bytes) -> None:
    func, args = pickle.loads(payload)
    _child(conn, func, args)


def _dumps(obj: Any) -> bytes:
    try:
        import cloudpickle as pickler  # pickles what plain pickle cannot (classes of a script)
    except ImportError:  # pragma: no cover - cloudpickle comes with distributed
        pickler = pickle
    return pickler.dumps(obj)


def run_isolated(func: Callable[..., Any], args: tuple, timeout: float | None = None,
                 label: str = "task") -> Any:
    """``func(*args)`` computed in a child process; ``func`` and ``args`` must pickle.

    Raises :class:`ExecutionError` naming ``label`` when the child dies before answering (an
    exception in ``func`` included: the child prints its traceback and exits) or when it has not
    answered within ``timeout`` seconds (it is then killed)."""
    if multiprocessing.current_process().daemon:
        return _run_interpreter(func, args, timeout, label)
    proc, receive = _start(func, args)
    try:
        if not receive.poll(timeout):
            proc.kill()
            raise _timed_out(label, timeout)
        try:
            return receive.recv()
        except EOFError:
            proc.join()
            raise _died(label, proc.exitcode) from None
    except BaseException:  # Ctrl-C included: the child goes at once
        proc.kill()
        raise
    finally:
        receive.close()
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()


def _start(func: Callable[..., Any], args: tuple) -> tuple[Any, Any]:
    """The started child process computing ``func(*args)``, and the end its answer comes to."""
    ctx: Any  # the default or the forkserver context
    target: Callable[..., None]
    targs: tuple
    if (threading.current_thread() is threading.main_thread()
            or "forkserver" not in multiprocessing.get_all_start_methods()):
        ctx = multiprocessing.get_context()
        target, targs = _child, (func, args)
    else:
        ctx = multiprocessing.get_context("forkserver")
        if getattr(func, "__module__", "__main__") != "__main__":
            ctx.set_forkserver_preload([func.__module__])  # once the server runs, a no-op
        target, targs = _child_pickled, (_dumps((func, args)),)
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(send, *targs), daemon=True)
    proc.start()
    send.close()
    return proc, receive


def _timed_out(label: str, timeout: float | None) -> ExecutionError:
    return ExecutionError(f"{label} timed out after {timeout:g} s")


def _died(label: str, code: int | None) -> ExecutionError:
    return ExecutionError(f"{label}: its worker process died (exit code {code})")


def _run_interpreter(func: Callable[..., Any], args: tuple, timeout: float | None,
                     label: str) -> Any:
    """:func:`run_isolated` through a fresh interpreter (see ``_SERVE``)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    try:
        done = subprocess.run([sys.executable, "-c", _SERVE], input=_dumps((func, args)),
                              stdout=subprocess.PIPE, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise _timed_out(label, timeout) from None
    if done.returncode != 0 or not done.stdout:
        raise _died(label, done.returncode)
    return pickle.loads(done.stdout)


def quiet_worker() -> None:
    """Initializer of a sweep's worker processes: Ctrl-C is the parent's to handle (no
    traceback from every worker), and SIGTERM (:func:`stop_pool`) ends a worker together with
    the isolated children it started."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _end_worker)


def _end_worker(signum: int, frame: Any) -> None:
    end_children()
    os._exit(128 + signum)


def end_children() -> None:
    """Kill the child processes this process started (the isolated calls under way) and reap
    them; each waiting :func:`run_isolated` then raises its :class:`ExecutionError`."""
    children = multiprocessing.active_children()
    for child in children:
        child.kill()
    for child in children:
        child.join(5)


def stop_pool(pool: Any) -> None:
    """Stop a ``ProcessPoolExecutor`` made with :func:`quiet_worker` now: cancel what has not
    started and end the workers (and their children) instead of waiting for their tasks."""
    workers = list((getattr(pool, "_processes", None) or {}).values())  # no public handle
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in workers:
        proc.terminate()
    for proc in workers:
        proc.join(5)
