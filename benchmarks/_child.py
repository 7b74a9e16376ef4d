"""Run a benchmark script's ``--child`` mode in a fresh interpreter (so peak memory is per run)
and read the JSON it prints on its last line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def spawn_child(script: str, args: list[str], timeout: float) -> Any | None:
    """``python SCRIPT --child ARGS...``; its last stdout line as JSON, None on timeout or
    failure (the child's stderr is passed on)."""
    cmd = [sys.executable, str(Path(script).resolve()), "--child", *map(str, args)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                             cwd=str(REPO))
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])
