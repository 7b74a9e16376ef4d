"""GrowthTracker against a networkx oracle of OpenVINO HETERO's global condition: no rejected
unit lies on a path between two members. Random add / reject / rollback / settle sequences,
checked after every step (as XLA's GraphCycles tests check against a reachability oracle)."""

from __future__ import annotations

import random

import networkx as nx
import pytest

import clusterkit as ck
from clusterkit.engines import growth
from clusterkit.engines.growth import GrowthTracker
from clusterkit.engines.super_nodes import SuperNodeGraph


def random_unit_graph(seed: int) -> SuperNodeGraph:
    rng = random.Random(seed)
    n = rng.randint(3, 40)
    g = nx.DiGraph()
    g.add_nodes_from((f"v{i}" for i in range(n)), op="Relu")
    for j in range(n):
        for i in range(max(0, j - 8), j):
            if rng.random() < 0.3:
                g.add_edge(f"v{i}", f"v{j}", bytes=4)
    return SuperNodeGraph(ck.make_problem(g, ["ops:Relu"]))


def violated(dag: nx.DiGraph, members: list[int], rejected: set[int]) -> bool:
    """Some rejected unit with a member before it and a member after it on paths."""
    inside = set(members)
    for r in rejected - inside:
        if nx.ancestors(dag, r) & inside and nx.descendants(dag, r) & inside:
            return True
    return False


class Model:
    """The growth as plain lists: members in order of joining, the rejected set."""

    def __init__(self, blocked: set[int]):
        self.members: list[int] = []
        self.rejected: set[int] = set(blocked)


def check_settle(dag, tracker, model, removed):
    """``settle`` stops at the longest prefix of the members that satisfies the condition."""
    before = model.members + []
    for x in removed:
        assert before[-1] == x
        assert violated(dag, before, model.rejected | set(removed)), "rolled back too far"
        before.pop()
    model.members = before
    model.rejected |= set(removed)
    assert not violated(dag, model.members, model.rejected)


def rollback(tracker, model):
    x = tracker.rollback()
    assert x == model.members.pop()
    model.rejected.add(x)


def compare(dag, tracker, model, n):
    assert tracker.violated == violated(dag, model.members, model.rejected)
    assert tracker.members == model.members
    assert all(tracker.is_member(u) == (u in model.members) for u in range(n))
    assert all(tracker.is_rejected(u) == (u in model.rejected and u not in model.members)
               for u in range(n) if not tracker.blocked or not tracker.blocked[u])


@pytest.mark.parametrize("searches", [False, True], ids=["scans", "searches"])
@pytest.mark.parametrize("seed", range(40))
def test_random_sequences_match_the_oracle(seed, searches, monkeypatch):
    if searches:  # the searches large growths use, instead of testing members one by one
        monkeypatch.setattr(growth, "_SCAN_MEMBERS", 0)
        monkeypatch.setattr(growth, "_SCAN_REJECTED", 0)
    rng = random.Random(1000 + seed)
    ug = random_unit_graph(seed)
    dag = nx.DiGraph()
    dag.add_nodes_from(range(ug.n))
    dag.add_edges_from(zip(ug.esrc.tolist(), ug.edst.tolist()))
    tracker = GrowthTracker(ug)
    for round_ in range(4):
        blocked = set(rng.sample(range(ug.n), rng.randint(0, ug.n // 4))) if round_ % 2 else set()
        flags = [u in blocked for u in range(ug.n)] if blocked else None
        if round_ == 3:   # the caller keeps the blocked landmarks' bits (as mxnet does)
            own = ug.landmarks[0]
            tracker.begin(flags, sum(own[u] for u in blocked))
        else:
            tracker.begin(flags)
        model = Model(blocked)
        for _ in range(rng.randint(1, 3 * ug.n)):
            free = [u for u in range(ug.n) if u not in model.rejected and u not in model.members]
            step = rng.random()
            if free and (step < 0.6 or not model.members):
                x = rng.choice(free)
                tracker.add(x)
                model.members.append(x)
            elif free and step < 0.9:
                x = rng.choice(free)
                tracker.reject(x)
                model.rejected.add(x)
            elif model.members:
                rollback(tracker, model)
            compare(dag, tracker, model, ug.n)
            # the tracker's contract: a failed condition is repaired before the next step
            if tracker.violated and rng.random() < 0.5:
                removed = tracker.settle(batch_after=rng.choice([1, 2, 8]))
                check_settle(dag, tracker, model, removed)
            while tracker.violated:
                rollback(tracker, model)
                compare(dag, tracker, model, ug.n)
        check_settle(dag, tracker, model, tracker.settle())


@pytest.mark.parametrize("seed", range(3))
def test_mxnet_keeps_the_blocked_landmarks_up_to_date(seed):
    """After every pass, the landmark bits mxnet keeps incrementally are those of its blocked
    units, recounted from the landmarks."""
    from clusterkit.engines import mxnet
    from clusterkit.graph.fast import graph_from_dag
    from clusterkit.testing.synthetic import LONG_EDGE_SUPPORTED, long_edge_dag

    graph = graph_from_dag(long_edge_dag(400, seed=seed))
    half = len(LONG_EDGE_SUPPORTED) // 2
    problem = ck.make_problem(graph, ["a=ops:" + ",".join(LONG_EDGE_SUPPORTED[:half]),
                                      "b=ops:" + ",".join(LONG_EDGE_SUPPORTED[half - 2:])])
    passes = mxnet._MXNet(problem, SuperNodeGraph(problem))
    own = passes.contracted.landmarks[0]
    for d in range(len(problem.devices)):
        passes.apply(d)
        assert any(passes.taken)
        assert passes.blocked_marks == sum(own[u] for u in range(passes.contracted.n)
                                           if passes.blocked[u])


@pytest.mark.parametrize("seed", range(20))
def test_replay_builds_the_state_of_the_logged_steps(seed):
    """``replay`` applies logged steps (join, reject, rollbacks) without checks: members in
    order, member and rejected flags, the rolled-back units and the window are those of the
    plain-list model."""
    rng = random.Random(2000 + seed)
    ug = random_unit_graph(seed)
    tracker = GrowthTracker(ug)
    for _ in range(3):
        tracker.begin()
        model = Model(set())
        steps: list[int] = []
        removed: dict[int, int] = {}
        rolled: list[int] = []
        for j in range(rng.randint(1, 2 * ug.n)):
            free = [u for u in range(ug.n) if u not in model.rejected and u not in model.members]
            if not free:
                break
            x = rng.choice(free)
            if rng.random() < 0.7 or not model.members:
                steps.append(x)
                model.members.append(x)
            else:
                steps.append(~x)
                model.rejected.add(x)
            k = rng.randint(0, len(model.members)) if rng.random() < 0.3 else 0
            if k:
                removed[j] = k
                for _ in range(k):
                    rolled.append(model.members.pop())
                    model.rejected.add(rolled[-1])
        assert tracker.replay(steps, removed, len(steps)) == rolled
        assert tracker.members == model.members and tracker.rolled == rolled
        assert all(tracker.is_member(u) == (u in model.members) for u in range(ug.n))
        assert all(tracker.is_rejected(u) == (u in model.rejected) for u in range(ug.n))
        orders = ug.orders
        if model.members:
            assert tracker.hi == tuple(max(o[m] for m in model.members) for o in orders)
            assert tracker.lo == tuple(min(o[m] for m in model.members) for o in orders)
            own, lin, lout = ug.landmarks
            acc_in = acc_out = 0
            for m in model.members:
                acc_in, acc_out = acc_in | lin[m], acc_out | lout[m]
            assert (tracker.marks_in, tracker.marks_out) == (acc_in, acc_out)
