"""Build gates for ``partition``, ``compare`` and ``run``: fail a CI job when the accelerator does
not take enough of the model.

``--require-full`` fails when any compute node (a node that is not folded: see
:attr:`clusterkit.graph.core.Graph.folded`) is on the fallback, as onnxruntime's
``session.disable_cpu_ep_fallback`` or Torch-TensorRT's ``require_full_compilation`` would;
``--max-partitions N`` when there are more than N accelerator partitions; ``--min-offload F``
when less than the share F (0..1) of the compute nodes is offloaded. The command writes its
outputs first; each failed gate then prints one line naming the gate and the figure, and the
command exits with :data:`GATE_FAILED` (2 stays "error").
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Iterable, Mapping

from clusterkit.result.report import plural

#: exit status of a command whose outputs are written but a gate failed
GATE_FAILED = 3


def add_gate_args(p: argparse.ArgumentParser) -> None:
    """``--require-full``, ``--max-partitions N``, ``--min-offload F``."""
    g = p.add_argument_group("gates (exit status 3 when one fails; outputs are still written)")
    g.add_argument("--require-full", action="store_true",
                   help="fail when any compute (non-folded) node is on the fallback")
    g.add_argument("--max-partitions", type=_count, default=None, metavar="N",
                   help="fail when there are more than N accelerator partitions")
    g.add_argument("--min-offload", type=_share, default=None, metavar="F",
                   help="fail when less than this share (0..1) of the compute nodes is offloaded")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"takes a whole number >= 0, got {text!r}")
    return value


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"takes a share between 0 and 1, got {text!r}")
    return value


def gate_failures(args: argparse.Namespace, partitions: int, share: float,
                  on_fallback: int | None = None, label: str = "") -> list[str]:
    """One line per failed gate for a result with ``partitions`` accelerator partitions and
    ``share`` of its compute nodes offloaded (``on_fallback``: how many compute nodes are not,
    when known); ``label`` names the result (a compare row)."""
    where = f"{label}: " if label else ""
    out = []
    if getattr(args, "require_full", False) and (share < 1.0 or (on_fallback or 0) > 0):
        figure = (f"{on_fallback} compute nodes on the fallback" if on_fallback is not None
                  else f"{share:.4g} of compute nodes offloaded")
        out.append(f"--require-full: {where}{figure}")
    limit = getattr(args, "max_partitions", None)
    if limit is not None and partitions > limit:
        out.append(f"--max-partitions {limit}: {where}{plural(partitions, 'partition')}")
    floor = getattr(args, "min_offload", None)
    if floor is not None and share < floor:
        out.append(f"--min-offload {floor:g}: {where}{share:.2f} of compute nodes offloaded")
    return out


def metrics_failures(args: argparse.Namespace, metrics: Mapping[str, Any]) -> list[str]:
    """:func:`gate_failures` of a partition's metrics (:meth:`Partition.metrics`)."""
    return gate_failures(args, int(metrics["partitions"]), float(metrics["offloaded_share"]),
                         int(metrics["compute_fallback"]))


def rows_failures(args: argparse.Namespace, results: Iterable[Mapping[str, Any]]) -> list[str]:
    """:func:`gate_failures` of every comparison row that has figures (``results``: the JSON
    form of comparisons, one per model); a row that failed is an error, not a gate."""
    out = []
    for res in results:
        for row in res["rows"]:
            if row.get("partitions") is None or row.get("offloaded_nodes") is None:
                continue
            out += gate_failures(args, int(row["partitions"]), float(row["offloaded_nodes"]),
                                 label=f"{row['model']} {row['strategy']}")
    return out


def gate_status(failures: list[str], code: int = 0) -> int:
    """Print one line per failed gate (stderr) and return the exit status: ``code`` when it is
    not 0, else :data:`GATE_FAILED` when a gate failed, else 0."""
    for line in failures:
        print(f"clusterkit: gate failed: {line}", file=sys.stderr)
    if code:
        return code
    return GATE_FAILED if failures else 0
