"""Build and load the recorder library of :mod:`clusterkit.io.ep_query` (``ep_recorder.c``).

The library is compiled once per source version with the system's C compiler (``$CC``, else
``cc``) into clusterkit's cache folder (``$XDG_CACHE_HOME/clusterkit``, else
``~/.cache/clusterkit``), written atomically; each EP gets its own copy of the file, because one
loaded copy forwards to one real EP library.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

from clusterkit.errors import BackendError

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ep_recorder.c")


def cache_dir() -> str:
    """The folder the built libraries go to."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "clusterkit")


def compiler() -> str | None:
    """The C compiler to build with, or None when there is none."""
    cc = os.environ.get("CC") or "cc"
    return shutil.which(cc) or shutil.which("gcc") or shutil.which("clang")


def build(ep_name: str) -> str:
    """The path of the recorder library for ``ep_name``, built when missing. Raises
    :class:`BackendError` when no C compiler is found or it fails."""
    with open(SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    folder = os.path.join(cache_dir(), f"ep-recorder-{digest}")
    path = os.path.join(folder, f"{ep_name}.so")
    if os.path.exists(path):
        return path
    cc = compiler()
    if cc is None:
        raise BackendError("recording an execution provider's answer needs a C compiler (set CC "
                           "or install cc) to build clusterkit's EP recorder once")
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".so.tmp")
    os.close(fd)
    try:
        run = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", tmp, SOURCE, "-ldl"],
                             capture_output=True, text=True, check=False)
        if run.returncode != 0:
            first = (run.stderr.strip().splitlines() or ["no message"])[0]
            raise BackendError(f"building clusterkit's EP recorder with {cc} failed: {first}")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def load(path: str, target: str) -> ctypes.CDLL:
    """The recorder at ``path`` loaded into this process, forwarding to the EP library
    ``target`` (onnxruntime's later ``dlopen`` of ``path`` finds this same copy)."""
    lib = ctypes.CDLL(path)
    lib.clusterkit_set_target.argtypes = [ctypes.c_char_p]
    lib.clusterkit_set_skip_compile.argtypes = [ctypes.c_int]
    lib.clusterkit_record.restype = ctypes.c_char_p
    lib.clusterkit_set_target(os.fsencode(target))
    return lib


def read_record(lib: ctypes.CDLL) -> list[tuple[str, list[tuple[str, str]]]]:
    """The recorded events in order: ``("group", [(node, op), ...])`` per group an EP handed
    over, ``("compile", [(count, "")])`` per compile request."""
    events: list[tuple[str, list[tuple[str, str]]]] = []
    for line in lib.clusterkit_record().decode("utf-8", "replace").splitlines():
        if line.startswith("group "):
            events.append(("group", []))
        elif line.startswith("compile "):
            events.append(("compile", [(line.split()[1], "")]))
        elif events and events[-1][0] == "group":
            name, _, op = line.partition("\t")
            events[-1][1].append((name, op))
    return events
