"""A Dask cluster as the executor of a sweep (optional extra ``clusterkit[dask]``).

:func:`dask_executor` opens a :class:`distributed.Client` on an existing scheduler, or on a
:class:`distributed.LocalCluster` it starts (worker processes of one thread each, not daemonic,
no dashboard) and shuts down afterwards, and yields the client's
:class:`concurrent.futures.Executor`, which :func:`~clusterkit.analysis.compare.compare_many`
takes as its ``executor``. The workers must be able to import clusterkit (and read the model
files by the paths given). Workers started with ``distributed.worker.daemon`` false (as here, or
``DASK_DISTRIBUTED__WORKER__DAEMON=False dask worker ...``) start an isolated model's child
process from a forkserver; daemonic ones need a fresh interpreter per model (see
:mod:`clusterkit.analysis.isolated`).
"""

from __future__ import annotations

import logging
import signal
import threading
from concurrent.futures import Executor
from contextlib import ExitStack, contextmanager
from typing import Iterator

from clusterkit.analysis.isolated import end_children
from clusterkit.errors import ExecutionError

#: how to get the optional dependency, for the error when it is missing
INSTALL_HINT = "pip install 'clusterkit[dask]'"


@contextmanager
def dask_executor(scheduler: str | None = None, *, workers: int | None = None,
                  connect_timeout: float = 10.0) -> Iterator[Executor]:
    """The executor of a Dask cluster: the one whose scheduler listens at ``scheduler`` (e.g.
    ``tcp://10.0.0.5:8786``), or else a local cluster of ``workers`` processes (default: one per
    CPU) started here and closed on exit.

    Raises :class:`~clusterkit.errors.ExecutionError` when distributed is not installed or the
    scheduler does not answer within ``connect_timeout`` seconds."""
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError as err:
        raise ExecutionError(f"Dask sweeps need the distributed package: {INSTALL_HINT}"
                             ) from err
    with ExitStack() as stack:
        if scheduler is None:
            # non-daemonic workers may start the child process of an isolated model from
            # multiprocessing's forkserver (a daemonic one needs a fresh interpreter per model)
            stack.enter_context(dask.config.set({"distributed.worker.daemon": False}))
            with _children_ignore_ctrl_c():
                cluster = stack.enter_context(LocalCluster(
                    n_workers=workers, processes=True, threads_per_worker=1,
                    dashboard_address=None, silence_logs=logging.ERROR,
                    scheduler_kwargs={"dashboard_address": ":0"}))  # HTTP routes: a free port
            client = stack.enter_context(Client(cluster))
        else:
            client = stack.enter_context(_connect(Client, scheduler, connect_timeout))
        executor = client.get_executor(pure=False)  # a model file may change between sweeps
        try:
            yield executor
        except KeyboardInterrupt:
            if scheduler is None:
                _stop_workers(client)
            raise
        executor.shutdown(wait=True)


def _stop_workers(client) -> None:
    """Ctrl-C: the local cluster closes while its workers still run models. Each worker first
    silences its ``distributed`` logging (it would log each lost heartbeat with a traceback),
    then ends the isolated child process of the model it runs, so that model's task ends at
    once and the cluster closes without waiting for it."""
    try:
        client.run(_end_running_models)
    except Exception:  # a worker that does not answer is closed anyway
        pass


def _end_running_models() -> None:
    """On a worker: quiet logging, and kill the child processes of the running tasks."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL + 1)
    end_children()


@contextmanager
def _children_ignore_ctrl_c() -> Iterator[None]:
    """SIGINT ignored while the local cluster's processes start: they inherit that (Python keeps
    an inherited ignore), so Ctrl-C reaches only this process, which closes the cluster, instead
    of every worker printing a ``KeyboardInterrupt`` traceback."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _connect(client_class: type, scheduler: str, timeout: float):
    """A client of the scheduler at ``scheduler``, or one clear error."""
    try:
        return client_class(scheduler, timeout=timeout)
    except ValueError as err:  # a malformed address: no port, an unknown scheme
        raise ExecutionError(f"bad Dask scheduler address {scheduler!r}: {_first_line(err)}"
                             ) from err
    except (OSError, TimeoutError) as err:
        raise ExecutionError(f"could not reach the Dask scheduler at {scheduler!r} within "
                             f"{timeout:g} s ({_first_line(err)})") from err


def _first_line(err: BaseException) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__
