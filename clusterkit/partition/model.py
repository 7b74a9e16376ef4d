"""Partitions: a cluster and a device for every node, validation, metrics and JSON.

Clusters are kept as lists of node ids so that a hand-made (possibly invalid) partition can be
represented and :meth:`Partition.validate` can say exactly what is wrong with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from clusterkit.constraints.core import CUT_EXPLICIT, CUT_VALUE, Problem
from clusterkit.constraints.limits import cluster_const_bytes  # noqa: F401 (also its old home)
from clusterkit.errors import PartitionError
from clusterkit.graph.algorithms import fifo_order, gc_paused, is_acyclic, quotient_edges
from clusterkit.graph.core import HOST, Graph
from clusterkit.partition.json_format import cluster_nodes, partition_json, read_partition_json
from clusterkit.partition.reasons import Reason, current_placement


@dataclass
class Cluster:
    """One cluster: ``nodes`` are topological indices, sorted."""

    id: int
    device: str
    nodes: list[int]


@dataclass
class Partition:
    """A partition of ``problem.graph``. Build one with :meth:`from_assignment` (engines) or
    :meth:`from_clusters` (anything hand-made); check it with :meth:`validate`."""

    problem: Problem
    clusters: list[Cluster]
    strategy: str = "manual"
    selector: str = ""
    solve_report: Any = field(default=None, kw_only=True)  # an exact engine's typed figures
    seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    #: why each fallback node the engine can explain is there
    #: (see :mod:`clusterkit.partition.reasons`)
    fallback_reasons: dict[int, Reason] = field(default_factory=dict)
    #: views derived from ``clusters`` (assignment, device per cluster, metrics), valid while
    #: ``clusters`` is the same list of the same length (see :meth:`_memo`)
    _views: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_assignment(cls, problem: Problem, labels: Sequence[int] | np.ndarray,
                        devices: Sequence[int] | np.ndarray, **kwargs) -> "Partition":
        """Build from a cluster label per node and a device index per node (-1 = fallback).
        Fallback nodes become singleton clusters, except that a together group on the fallback
        stays one cluster. Cluster ids are renumbered in order of their first node."""
        labels = np.asarray(labels, dtype=np.int64)
        devices = np.asarray(devices, dtype=np.int64)
        n = problem.n
        if labels.shape != (n,) or devices.shape != (n,):
            raise PartitionError(f"expected {n} labels and devices, got {labels.shape}, "
                                 f"{devices.shape}")
        if n == 0:
            return cls(problem, [], **kwargs)
        key = labels.copy()
        fb = devices < 0
        # fallback nodes: a key of their own, unless in a together group
        base = int(labels.max()) + 1
        gkey = np.where(problem.group_of >= 0, base + problem.group_of,
                        base + len(problem.groups) + np.arange(n))
        key[fb] = gkey[fb]
        # one sort (by key, members ascending) instead of one array per cluster: 1e6 nodes
        order = np.argsort(key, kind="stable")
        sk = key[order]
        starts = np.flatnonzero(np.concatenate(([True], sk[1:] != sk[:-1])))
        ends = np.append(starts[1:], n)
        first = order[starts]
        mixed = np.flatnonzero(devices[order] != np.repeat(devices[first], ends - starts))
        if len(mixed):
            v = int(order[mixed[0]])
            raise PartitionError(f"node {problem.graph.nodes[v].name!r} has label {labels[v]} "
                                 "but another device than the rest of its cluster")
        rank = np.argsort(first, kind="stable")  # cluster ids in order of their first node
        names = list(problem.devices) + [problem.fallback]  # index -1 = fallback
        dev_of = devices[first][rank]
        flat = order.tolist()
        st, en = starts[rank].tolist(), ends[rank].tolist()
        with gc_paused():  # millions of small lists; map() builds them at C speed
            clusters = list(map(Cluster, range(len(st)), map(names.__getitem__, dev_of.tolist()),
                                map(flat.__getitem__, map(slice, st, en))))
        out = cls(problem, clusters, **kwargs)
        pos = np.empty(len(rank), dtype=np.int64)
        pos[rank] = np.arange(len(rank), dtype=np.int64)
        assignment = np.empty(n, dtype=np.int64)
        assignment[order] = np.repeat(pos, ends - starts)
        views = out._memo()
        views["assignment"], views["devices"] = assignment, dev_of
        return out

    @classmethod
    def from_clusters(cls, problem: Problem, clusters: Iterable[tuple[str, Iterable[int]]],
                      **kwargs) -> "Partition":
        """Build from ``(device, node ids)`` pairs, as given (not checked: see validate)."""
        out = [Cluster(k, dev, sorted(int(v) for v in nodes))
               for k, (dev, nodes) in enumerate(clusters)]
        return cls(problem, out, **kwargs)

    @classmethod
    def from_json(cls, problem: Problem, data: dict | str) -> "Partition":
        """Read a partition JSON, a file or its loaded dict (docs/design.md format; ``nodes`` are
        source indices), as given (not checked: see validate)."""
        data = read_partition_json(data)
        g = problem.graph
        clusters = [(dev, g.source_to_index[nodes].tolist())
                    for dev, nodes in cluster_nodes(data, g.n, "partition JSON")]
        return cls.from_clusters(problem, clusters, strategy=str(data.get("strategy", "plan")),
                                 selector=str(data.get("selector", "")))

    # ------------------------------------------------------------------ views
    @property
    def graph(self) -> Graph:
        return self.problem.graph

    @property
    def fallback(self) -> str:
        return self.problem.fallback

    def _memo(self) -> dict[str, Any]:
        """The derived views, emptied first when ``clusters`` is another list or changed length
        since they were made (clusters are not to be edited in place once read)."""
        views = self._views
        if views.get("of") is not self.clusters or views.get("k") != len(self.clusters):
            views.clear()
            views["of"], views["k"] = self.clusters, len(self.clusters)
        return views

    def assignment(self) -> np.ndarray:
        """Cluster position per node (a new array); raises if a node is in no cluster or in
        two."""
        views = self._memo()
        if "assignment" not in views:
            views["assignment"] = self._assignment()
        return views["assignment"].copy()

    def device_indices(self) -> np.ndarray:
        """Device index per cluster position (a new array; -1 for the fallback)."""
        views = self._memo()
        if "devices" not in views:
            p = self.problem
            views["devices"] = np.asarray([p.device_index(c.device) for c in self.clusters],
                                          dtype=np.int64)
        return views["devices"].copy()

    def cluster_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct edges between clusters, as arrays of cluster positions (sorted)."""
        views = self._memo()
        if "edges" not in views:
            g = self.graph
            views["edges"] = quotient_edges(self.assignment(), g.edge_src, g.edge_dst)
        src, dst = views["edges"]
        return src.copy(), dst.copy()

    def cluster_order(self) -> list[int]:
        """A topological order of the cluster positions (a new list): the one recorded with
        :meth:`record_order`, else Kahn's, first in first out; raises
        :class:`~clusterkit.errors.CycleError` when the clusters form a cycle."""
        views = self._memo()
        if "order" not in views:
            views["order"] = fifo_order(len(self.clusters), *self.cluster_edges())
        return list(views["order"])

    def record_order(self, order: np.ndarray) -> bool:
        """Keep ``order`` (cluster positions) as :meth:`cluster_order` when it is a topological
        order of the clusters (checked on :meth:`cluster_edges`), for a maker that has one at
        hand; returns whether it was kept."""
        k = len(self.clusters)
        order = np.asarray(order, dtype=np.int64)
        if order.shape != (k,) or (k and (order.min() < 0 or order.max() >= k)):
            return False
        pos = np.full(k, -1, dtype=np.int64)
        pos[order] = np.arange(k, dtype=np.int64)
        src, dst = self.cluster_edges()
        if (pos < 0).any() or not bool(np.all(pos[src] < pos[dst])):
            return False
        self._memo()["order"] = order.tolist()
        return True

    def _assignment(self) -> np.ndarray:
        n = self.graph.n
        sizes = [len(c.nodes) for c in self.clusters]
        flat = np.fromiter((v for c in self.clusters for v in c.nodes), dtype=np.int64,
                           count=sum(sizes))
        if len(flat) == n and (n == 0 or (flat.min() >= 0 and flat.max() < n)):
            out = np.full(n, -1, dtype=np.int64)
            out[flat] = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
            if (out >= 0).all():  # each node once: a valid assignment
                return out
        out = np.full(n, -1, dtype=np.int64)  # find the first fault, in cluster order
        names = self.graph.nodes
        for pos, c in enumerate(self.clusters):
            for v in c.nodes:
                if not 0 <= v < n:
                    raise PartitionError(f"cluster {c.id} names node {v}, but the graph has {n}")
                if out[v] >= 0:
                    raise PartitionError(f"node {names[v].name!r} is in two clusters: "
                                         f"{self.clusters[out[v]].id} and {c.id}")
                out[v] = pos
        missing = np.flatnonzero(out < 0)
        if len(missing):
            raise PartitionError(f"node {names[missing[0]].name!r} is in no cluster"
                                 f" ({len(missing)} nodes are in none)")
        return out

    def device_of_nodes(self) -> list[str]:
        """Device name per node."""
        out = [""] * self.graph.n
        for c in self.clusters:
            for v in c.nodes:
                out[v] = c.device
        return out

    def units(self, assignment: np.ndarray | None = None) -> np.ndarray:
        """Transfer unit per node: the cluster position for accelerator clusters, HOST (-1) for
        every fallback node."""
        a = self.assignment() if assignment is None else assignment
        views = self._memo()
        if "devices" in views:
            on_host = views["devices"] < 0
        else:
            on_host = np.asarray([c.device == self.fallback for c in self.clusters], dtype=bool)
        return np.where(on_host[a], HOST, a)

    def accelerator_clusters(self) -> list[Cluster]:
        """Clusters on a non-fallback device."""
        return [c for c in self.clusters if c.device != self.fallback]

    def cluster_graph(self):
        """The graph of clusters as a networkx DiGraph (nodes = cluster positions)."""
        import networkx as nx

        a = self.assignment()
        g = nx.DiGraph()
        for k, c in enumerate(self.clusters):
            g.add_node(k, device=c.device, size=len(c.nodes))
        cu, cv = a[self.graph.edge_src], a[self.graph.edge_dst]
        keep = cu != cv
        g.add_edges_from(zip(cu[keep].tolist(), cv[keep].tolist()))
        return g

    # ------------------------------------------------------------------ validation
    def validate(self) -> "Partition":
        """Raise :class:`PartitionError` with the precise reason if invalid; return self."""
        a = self.assignment()
        dev_idx = np.asarray([self._check_cluster(c) for c in self.clusters], dtype=np.int64)
        self._check_edges(a, dev_idx)
        p, nodes = self.problem, self.graph.nodes  # names read for a message only
        for u, v in p.never_pairs.tolist():
            if a[u] == a[v]:
                raise PartitionError(f"never-together nodes {nodes[u].name!r} and "
                                     f"{nodes[v].name!r} are both in cluster "
                                     f"{self.clusters[a[u]].id}")
        for gi, members in enumerate(p.groups):
            if len(set(a[members].tolist())) > 1:
                raise PartitionError(f"together group {gi} is split: "
                                     f"{nodes[members[0]].name!r} is in cluster "
                                     f"{self.clusters[a[members[0]]].id}, but other "
                                     "members are elsewhere")
        self._check_acyclic(a)
        return self

    def _check_cluster(self, c: Cluster) -> int:
        """A cluster's device index (-1: fallback), checked: not empty, every node supported,
        within its device's limits."""
        p, g = self.problem, self.graph
        if not c.nodes:
            raise PartitionError(f"cluster {c.id} is empty")
        d = p.device_index(c.device) if c.device != p.fallback else -1
        if d < 0:
            return d
        bad = [v for v in c.nodes if not p.supported[d, v]]
        if bad:
            nd = g.nodes[bad[0]]
            raise PartitionError(f"node {nd.name!r} ({nd.op_type}) is in cluster {c.id} on"
                                 f" device {c.device!r}, which does not support it")
        self._check_limits(c, d)
        return d

    def _check_limits(self, c: Cluster, d: int) -> None:
        """Cluster ``c`` on device ``d`` within its device's limits (the global ones and the
        device's own, the tighter of each: :class:`~clusterkit.constraints.limits.Limits`)."""
        lim, size = self.problem.limits, len(c.nodes)
        lo, hi, cb = lim.min_nodes[d], lim.max_nodes[d], lim.max_const[d]
        if size < lo:
            raise PartitionError(f"cluster {c.id} on {c.device!r} has {size} nodes, below"
                                 f" {lim.setting(d, 'min')} {lo}")
        if hi is not None and size > hi:
            raise PartitionError(f"cluster {c.id} on {c.device!r} has {size} nodes, above"
                                 f" {lim.setting(d, 'max')} {hi}")
        if cb is not None:
            held = cluster_const_bytes(self.graph, c.nodes)
            if held > cb:
                raise PartitionError(f"cluster {c.id} on {c.device!r} holds {held} bytes of"
                                     f" constants, above {lim.setting(d, 'bytes')} {cb}")

    def _check_edges(self, a: np.ndarray, dev_idx: np.ndarray) -> None:
        """No must-cut edge and no edge its device's selector refuses inside a cluster."""
        p, g = self.problem, self.graph
        nodes = g.nodes  # names read for a message only
        src, dst = g.edge_src, g.edge_dst
        same = a[src] == a[dst]
        for e in np.flatnonzero(same & p.must_cut).tolist():
            u, v = int(src[e]), int(dst[e])
            why = ("it is a required cut" if p.cut_reason[e] == CUT_EXPLICIT else
                   f"node {nodes[v].name!r} ({nodes[v].op_type}) must know the value it reads"
                   f" from {nodes[u].name!r}" if p.cut_reason[e] == CUT_VALUE
                   else "a constraint cuts it")
            raise PartitionError(f"edge {nodes[u].name!r} -> {nodes[v].name!r} lies inside "
                                 f"cluster {self.clusters[a[u]].id}, but {why}")
        if len(p.devices):
            d_e = dev_idx[a[src]]
            inside = np.flatnonzero(same & (d_e >= 0))
            refused = inside[~p.edge_ok[d_e[inside], inside]]
            if len(refused):
                e = int(refused[0])
                u, v = int(src[e]), int(dst[e])
                raise PartitionError(f"edge {nodes[u].name!r} -> {nodes[v].name!r} lies inside "
                                     f"cluster {self.clusters[a[u]].id}, but the selector of "
                                     f"{self.clusters[a[u]].device!r} refuses to follow it")

    def _check_acyclic(self, a: np.ndarray) -> None:
        g = self.graph
        k = len(self.clusters)
        cu, cv = a[g.edge_src], a[g.edge_dst]
        keep = cu != cv
        if not keep.any() or is_acyclic(k, *quotient_edges(a, g.edge_src, g.edge_dst)):
            return
        from scipy.sparse import coo_matrix  # a cycle to describe: heavy imports, paid on use
        from scipy.sparse.csgraph import connected_components

        mat = coo_matrix((np.ones(int(keep.sum())), (cu[keep], cv[keep])), shape=(k, k)).tocsr()
        ncomp, comp = connected_components(mat, directed=True, connection="strong")
        if ncomp == k:
            return
        sizes = np.bincount(comp)
        bad = int(np.flatnonzero(sizes > 1)[0])
        raise PartitionError(self._describe_cycle(a, set(np.flatnonzero(comp == bad).tolist())))

    def _describe_cycle(self, a: np.ndarray, scc: set[int]) -> str:
        """A concrete node path for a cycle among the clusters in ``scc``."""
        g = self.graph
        names = [nd.name for nd in g.nodes]
        start = min(scc)
        succ = g.succ_lists
        # BFS over nodes of the SCC's clusters, from the nodes of `start`, back into `start`
        # after leaving it.
        from collections import deque

        parent: dict[int, int] = {}
        queue: deque[int] = deque()
        for u in self.clusters[start].nodes:
            for w in succ[u]:
                if a[w] != start and a[w] in scc and w not in parent:
                    parent[w] = u
                    queue.append(w)
        end = None
        while queue and end is None:
            u = queue.popleft()
            for w in succ[u]:
                if a[w] == start:
                    end = (u, w)
                    break
                if a[w] in scc and w not in parent:
                    parent[w] = u
                    queue.append(w)
        if end is None:  # pragma: no cover - an SCC always closes
            return f"the clusters {sorted(self.clusters[c].id for c in scc)} form a cycle"
        path = [end[1], end[0]]
        while path[-1] in parent:
            path.append(parent[path[-1]])
        path.reverse()
        cid = self.clusters[start].id
        between = path[1:-1]
        outside_clusters = sorted({int(a[v]) for v in between})
        hops = " -> ".join(f"{names[v]!r} [cluster {self.clusters[a[v]].id}]" for v in path)
        if len(outside_clusters) == 1 and len(self.clusters[outside_clusters[0]].nodes) == 1:
            return (f"a path leaves cluster {cid} at node {names[path[0]]!r} and re-enters it at "
                    f"node {names[path[-1]]!r} through outside node {names[between[0]]!r}: {hops}")
        if len(outside_clusters) == 1:
            other = self.clusters[outside_clusters[0]].id
            return (f"clusters {cid} and {other} depend on each other (a path leaves cluster "
                    f"{cid} and re-enters it): {hops}")
        return f"the graph of clusters has a cycle through cluster {cid}: {hops}"

    def is_valid(self) -> bool:
        """True when :meth:`validate` passes."""
        try:
            self.validate()
        except PartitionError:
            return False
        return True

    # ------------------------------------------------------------------ metrics and output
    def figures(self) -> tuple[int, int, int]:
        """(fallback nodes, cut_bytes, partitions) from :meth:`metrics`: the key by which
        ``auto`` and the cost device choice rank partitions."""
        m = self.metrics()
        return int(m["fallback_nodes"]), int(m["cut_bytes"]), int(m["partitions"])

    def metrics(self) -> dict[str, Any]:
        """docs/design.md metrics: partitions, cut_bytes, largest_cluster, nodes_offloaded, ...;
        ``folded_nodes`` (see :attr:`Graph.folded`) are left out of ``compute_nodes`` and of the
        ``offloaded_share`` (``compute_offloaded / compute_nodes``)."""
        views = self._memo()
        if "metrics" not in views:
            views["metrics"] = self._metrics(views)
        return dict(views["metrics"])

    def _metrics(self, views: dict[str, Any]) -> dict[str, Any]:
        a = self.assignment()
        units = self.units(a)
        cut, unknown = cut_bytes(self.graph, units)
        if "devices" in views:
            on = views["devices"] >= 0
        else:
            on = np.asarray([c.device != self.fallback for c in self.clusters], dtype=bool)
        sizes = np.bincount(a, minlength=len(self.clusters))[on]  # each node once: a is valid
        offloaded = int(sizes.sum())
        n = self.graph.n
        folded = self.graph.folded
        compute = n - int(folded.sum())
        compute_off = int((~folded[units != HOST]).sum())
        return {
            "partitions": int(on.sum()),
            "cut_bytes": int(cut),
            "largest_cluster": int(sizes.max()) if len(sizes) else 0,
            "nodes_offloaded": offloaded,
            "offloaded_share": compute_off / compute if compute else float(n > 0),
            "clusters": len(self.clusters),
            "fallback_nodes": n - offloaded,
            "cut_tensors_unknown_size": int(unknown),
            "folded_nodes": n - compute,
            "compute_nodes": compute,
            "compute_offloaded": compute_off,
            "compute_fallback": compute - compute_off,
        }

    def placement(self) -> dict[str, Any]:
        """The placement report (:func:`clusterkit.partition.reasons.current_placement`), kept in
        ``info["placement"]``: what the partition JSON carries for every strategy."""
        return current_placement(self)

    def to_json(self, model: str | None = None) -> dict[str, Any]:
        """The partition JSON of docs/design.md (``nodes`` are source indices); see
        :func:`clusterkit.partition.json_format.partition_json`."""
        return partition_json(self, model)

    def summary(self) -> str:
        """One line for people. Its figures count compute nodes only (folded nodes, see
        :attr:`Graph.folded`, are neither offloaded nor fallen back, wherever a strategy put
        them), so they mean the same for every selector and with ``--optimize``."""
        m = self.metrics()
        folded = self.graph.folded
        per_dev: dict[str, int] = {}
        for c in self.clusters:
            own = len(c.nodes) - int(folded[np.asarray(c.nodes, dtype=np.int64)].sum())
            per_dev[c.device] = per_dev.get(c.device, 0) + own
        devs = ", ".join(f"{d} {k}" for d, k in sorted(  # the fallback last
            per_dev.items(), key=lambda item: item[0] == self.fallback))
        return (f"{self.graph.name}: strategy {self.strategy}, "
                f"{plural(m['partitions'], 'partition')}, largest {m['largest_cluster']} nodes, "
                f"{m['compute_offloaded']}/{m['compute_nodes']} compute nodes offloaded"
                f"{folded_note(m)}, {cut_note(m)} (compute nodes: {devs}), {self.seconds:.3f}s")


def plural(count: int, word: str) -> str:
    """``1 partition``, ``2 partitions``."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def folded_note(metrics: dict[str, Any]) -> str:
    """``, 93 folded`` when some nodes are folded, else ``""`` (``metrics`` as
    :meth:`Partition.metrics` gives them)."""
    return f", {metrics['folded_nodes']} folded" if metrics.get("folded_nodes") else ""


def cut_note(metrics: dict[str, Any]) -> str:
    """``cut_bytes 1,024``, or ``cut_bytes ≥ 1,024, 12 cut tensors of unknown size`` when some
    cut tensors have no known size (counted as 0 bytes)."""
    unknown = int(metrics.get("cut_tensors_unknown_size") or 0)
    if not unknown:
        return f"cut_bytes {metrics['cut_bytes']:,}"
    return (f"cut_bytes ≥ {metrics['cut_bytes']:,}, "
            f"{plural(unknown, 'cut tensor')} of unknown size")


def cut_bytes(graph: Graph, units: np.ndarray) -> tuple[int, int]:
    """docs/design.md cut_bytes for a transfer unit per node (HOST=-1 for fallback nodes), and the
    number of cut transfers whose tensor size is unknown (counted as 0 bytes)."""
    tt = graph.tensor_table
    prod_unit = np.where(tt.producer >= 0, units[np.maximum(tt.producer, 0)], HOST)
    cu = units[tt.inc_node]
    live = ~tt.free[tt.inc_tensor] & (cu != prod_unit[tt.inc_tensor])
    k = int(units.max()) + 2 if len(units) else 1
    pair = np.sort(tt.inc_tensor[live] * k + (cu[live] + 1))  # sort + mask beats np.unique
    if len(pair):
        pair = pair[np.concatenate(([True], pair[1:] != pair[:-1]))]
    ten = pair // k
    total = int(tt.nbytes[ten].sum())
    unknown = int((~tt.known[ten]).sum())
    outs = np.flatnonzero(tt.is_output & ~tt.free & (prod_unit != HOST))
    total += int(tt.nbytes[outs].sum())
    unknown += int((~tt.known[outs]).sum())
    return total, unknown
