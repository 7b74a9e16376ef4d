"""A partition's provenance is set once and carried, never copied by hand: engines return
clusters, devices, reasons and a record of their own; the front door's pipeline runs the
passes, records each, and names the strategy; a partition derived from another goes through
``Partition.derive``; the placement report is a view of the partition it belongs to."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import clusterkit as ck
from clusterkit.result.reasons import Category, Reason

PACKAGE = Path(__file__).resolve().parents[1] / "clusterkit"
#: the provenance fields only ``Partition.derive`` and the front door set
PROVENANCE = {"strategy", "selector", "seconds", "fallback_reasons"}
#: the partition constructors and ``dataclasses.replace``
MAKERS = {"from_assignment", "from_clusters", "Partition", "replace"}


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _hand_copies(tree: ast.AST) -> list[str]:
    """Calls that copy provenance into a new partition, and assignments of it after the fact."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in MAKERS:
            for kw in node.keywords:
                copied = isinstance(kw.value, ast.Attribute) and kw.value.attr == kw.arg
                if kw.arg in {"strategy", "selector", "seconds"} or copied or (
                        kw.arg == "info" and isinstance(kw.value, ast.Call)
                        and _name(kw.value.func) == "dict"):
                    found.append(f"line {node.lineno}: {_name(node.func)}({kw.arg}=...)")
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Attribute) and t.attr in PROVENANCE and \
                        getattr(t.value, "id", "") not in ("self", "args", "row", "report"):
                    found.append(f"line {node.lineno}: .{t.attr} = ...")
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_copies_a_partitions_provenance_by_hand(path):
    if path.relative_to(PACKAGE).as_posix() == "result/model.py":  # derive itself
        return
    assert _hand_copies(ast.parse(path.read_text())) == []


def test_the_checker_finds_a_hand_copy():
    bad = ("out = Partition.from_assignment(p, a, d, strategy=part.strategy, info=dict(x))\n"
           "out.seconds = 1.0\nnew = replace(part, selector=part.selector)\n")
    assert len(_hand_copies(ast.parse(bad))) == 4


def test_no_stale_report_heuristic_remains():
    report = (PACKAGE / "result" / "report.py").read_text()
    assert "_stale" not in report and "def current_placement" not in report


def _chain() -> nx.DiGraph:
    g = nx.DiGraph()
    for name, op in [("a", "A"), ("b", "A"), ("z", "Z"), ("c", "A"), ("d", "A")]:
        g.add_node(name, op=op)
    g.add_edges_from([("a", "b"), ("b", "z"), ("z", "c"), ("c", "d")])
    return g


def test_the_front_door_records_each_pass_and_names_the_run():
    problem = ck.make_problem(_chain(), ["acc=ops:A"])
    raw = ck.get_strategy("singleton")(problem)
    part = ck.run_strategy(problem, "singleton", selector="acc=ops:A", coalesce_after=True)
    assert (part.strategy, part.selector) == ("singleton", "acc=ops:A") and part.seconds > 0
    steps = part.info["pipeline"]
    assert [s["name"] for s in steps] == ["coalesce", "reject_subgraphs"]
    # coalescing merged a-b and c-d (z keeps them apart): 5 singletons became 3 clusters
    assert steps[0]["clusters"] == [len(raw.clusters), 3] and steps[0]["changed"]
    assert steps[1]["clusters"] == [3, 3] and not steps[1]["changed"]
    assert steps[1]["fallback_nodes"] == [1, 1] and len(part.clusters) == 3
    assert all(s["seconds"] >= 0 for s in steps)


def test_derive_carries_provenance_and_the_report_follows_the_clusters():
    problem = ck.make_problem(_chain(), ["acc=ops:A"])
    part = ck.run_strategy(problem, "mxnet", selector="mine")
    before = part.placement()
    assert before["fallen_back"] and {e["node"] for e in before["fallen_back"]} == {"z"}
    labels = part.assignment()
    devices = part.device_indices()[labels]
    d = problem.graph.name_to_index["d"]
    devices[d] = -1
    why = Reason(Category.CONSTRAINT, "moved off by the test")
    out = part.derive(labels, devices, reasons={d: why}, info={"mine": 1})
    assert (out.strategy, out.selector, out.seconds) == (part.strategy, part.selector,
                                                         part.seconds)
    assert out.info["mine"] == 1 and "mine" not in part.info
    fell = {e["node"]: e for e in out.placement()["fallen_back"]}
    assert set(fell) == {"z", "d"} and fell["d"]["detail"] == "moved off by the test"
    assert fell["z"]["reason"] == Category.OP_NOT_SUPPORTED
    # the original is untouched: its report, reasons and info as they were
    assert part.placement() == before and d not in part.fallback_reasons


def test_provenance_fields_cannot_be_reassigned():
    part = ck.run_strategy(ck.make_problem(_chain(), ["acc=ops:A"]), "singleton")
    for name in ("clusters", "problem", "fallback_reasons"):
        with pytest.raises(AttributeError, match="Partition.derive"):
            setattr(part, name, getattr(part, name))


def test_the_report_of_a_cost_choice_is_against_the_whole_problem():
    """Before the report was a view, the report made on the narrowed problem of the cost device
    choice was kept: on vit_b_16 it said only coreml took the Transposes qnn takes too."""
    from support.models import BUNDLED_MODELS

    problem = ck.make_problem(BUNDLED_MODELS / "vit_b_16.onnx", ["qnn", "coreml"])
    part = ck.run_strategy(problem, "mxnet", devices="cost")
    ops = np.asarray(problem.graph.op_types, dtype=object)
    checked = 0
    for e in part.placement()["fallen_back"]:
        if e["reason"] != Category.SELECTOR_CONDITION or " other " not in e["detail"]:
            continue
        same_op = ops == e["op"]
        takers = [d for k, d in enumerate(problem.devices) if problem.supported[k, same_op].any()]
        verb = "takes" if len(takers) == 1 else "take"
        assert e["detail"].startswith(f"{', '.join(takers)} {verb} other {e['op']} nodes"), e
        checked += len(takers) > 1
    assert checked  # some refused node's op is taken elsewhere by both devices


def _chained(steps: list[dict], clusters: int) -> None:
    """Each record starts where the one before it ended, and the last ends at ``clusters``."""
    for before, after in zip(steps, steps[1:]):
        assert after["clusters"][0] == before["clusters"][1], (before, after)
        assert after["fallback_nodes"][0] == before["fallback_nodes"][1], (before, after)
    assert steps[-1]["clusters"][1] == clusters


def test_auto_runs_its_members_passes_through_the_manager():
    """The winner's record lists its member's coalescing and rejection, then the front door's
    rejection: one record per pass, in order, whichever member won."""
    problem = ck.make_problem(_chain(), ["acc=ops:A"])
    raw = ck.get_strategy("longest-path")(problem)
    part = ck.run_strategy(problem, "auto", members=["longest-path"], polish=0)
    steps = part.info["pipeline"]
    assert [s["name"] for s in steps] == ["coalesce", "reject_subgraphs", "reject_subgraphs"]
    assert steps[0]["clusters"][0] == len(raw.clusters)
    _chained(steps, len(part.clusters))
