"""The passes around a strategy, one function each with one signature.

- A problem → problem pre-pass, ``pre(problem, **options) -> Problem``: the device choice
  (:func:`~clusterkit.passes.devices.choose_devices`, ``--devices cost``), which narrows a
  problem where several devices take a node.
- Partition → partition post-passes, ``post(partition, **options) -> Partition`` (a new
  partition, or the same one when nothing changes; the argument is never edited): coalescing
  (:mod:`~clusterkit.passes.coalesce`), level merging (:mod:`~clusterkit.passes.horizontal`),
  the refinement (:mod:`~clusterkit.passes.refine`), the acceptable split
  (:mod:`~clusterkit.passes.acceptable`) and the subgraph rejection the front door runs after
  every strategy (:mod:`~clusterkit.passes.reject`).

Options are keywords with defaults; a pipeline names its passes by their keys in
:data:`~clusterkit.passes.manager.PRE_PASSES` and :data:`~clusterkit.passes.manager.POST_PASSES`
(:mod:`~clusterkit.passes.manager` runs and records them). The passes read the problem and
the partition only, never a strategy: they sit below the engines, which run them.
"""

from __future__ import annotations

from clusterkit.passes.acceptable import make_acceptable
from clusterkit.passes.coalesce import coalesce
from clusterkit.passes.devices import choose_devices
from clusterkit.passes.horizontal import merge_levels
from clusterkit.passes.manager import POST_PASSES, PRE_PASSES, PartitionPass, ProblemPass
from clusterkit.passes.refine import refine
from clusterkit.passes.reject import reject_subgraphs

__all__ = ["POST_PASSES", "PRE_PASSES", "PartitionPass", "ProblemPass", "choose_devices",
           "coalesce", "make_acceptable", "merge_levels", "refine", "reject_subgraphs"]
