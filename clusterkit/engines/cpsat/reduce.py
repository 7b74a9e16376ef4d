"""Shrinking a clustering problem before the exact solver sees it.

The exact model (:mod:`clusterkit.engines.cpsat.build`) works on *super-nodes*: sets of original
nodes that some optimal partition keeps in one cluster. This module builds them, with one proof
per reduction. Throughout, "optimal" is the lexicographic optimum of
:mod:`clusterkit.constraints.objectives`: fewest fallback nodes first, then
``w_cut * cut_bytes + w_partitions * partitions``.

Notation: a *unit* is an offloaded cluster or the host (every fallback node). ``cut_bytes``
charges each non-constant tensor once per distinct consuming unit other than its producer's unit,
plus once more when it is a graph output produced off the host (docs/design.md). A node is *fixed
acc* when every optimal partition we keep offloads it, *fixed host* when it is always on the
fallback.

Lemma M (used by the proofs below). *Let S be a set of nodes of one offloaded cluster C_S and
C another cluster whose device takes S and follows every edge between C and S. If every
predecessor of S lies in C or S and some edge runs from C into S, moving S into C keeps the
graph of clusters acyclic; likewise with successors and an edge from S into C.* Proof (the
predecessor case; the other is its mirror image): map the new clusters to the old ones (C u S to
C, C_S minus S to C_S, the others to themselves). An edge between two new clusters that does not
start in S maps to an edge between the corresponding old clusters (no edge ends in S from outside
C u S). A new cycle that avoids C u S therefore was an old cycle. One through C u S that leaves it
from C maps to an old cycle through C; one that leaves it from S maps to an old walk C_S -> ... ->
C, which the old edge from C into S (C -> C_S) closes into an old cycle. Each contradicts the
validity of the old partition.

Reductions (each may be switched off; the solver is exact without them):

R1 *offload is forced* (``fix``): when ``min_size <= 1``, every node some device supports is
   offloaded in every optimum, except members of a together group that no device can host as one
   cluster. Proof: the "singleton" partition (each such node alone on a device that takes it, each
   hostable group as one cluster) is valid - singletons and convex groups cannot form a cycle, no
   edge lies inside a singleton, a group's internal edges are followed by its device - and it
   leaves on the fallback only nodes that no partition can offload (no device takes them, or the
   group can never be one offloaded cluster: a refused internal edge or too many constant bytes
   stay refused/too many in any larger cluster). So it reaches the lower bound of the first
   criterion, and every optimum has exactly that fallback set.
R2 *constant nodes are free* (``constants``; cut objective, ``min_size <= 1``): a node computing
   from constants alone (weight stubs) is taken out of the model and placed alone, on the first
   device that takes it (else the fallback). Its outputs are constants, so it adds nothing to
   cut_bytes wherever it is; its predecessors are constant nodes too, so no path runs from a
   non-constant node into it and a singleton cannot close a cycle (a cycle would have to enter
   it from another constant singleton, and so on backwards forever, in a finite DAG); a singleton
   satisfies every constraint (``supported`` already excludes nodes holding too many constant
   bytes alone). Offloading it is the lexicographic optimum of the first criterion.
R3 *leaves join their producer* (``leaves``): a fixed-acc super-node S whose only predecessor is a
   fixed-acc U (no graph input read, no never-together pair), whose consumers are all fixed host,
   with every device of U taking S and following the U->S edges, joins U. Proof: take an optimum
   with S outside U's cluster C. Moving S into C keeps the partition valid (Lemma M with the
   U -> S edge; devices and edges by assumption; no size or constant limits are active - the
   rule is off otherwise). Its cost cannot rise: S's inputs come from C, so S stops being a
   consuming unit; S's outputs go to the host, which is a distinct unit from C just as it was
   from S's old cluster; graph outputs are charged the same off the host; the partition count
   cannot grow.
R4 *roots join their consumer* (``roots``): the mirror image. A fixed-acc S whose only successor
   is a fixed-acc V, whose every non-constant input tensor comes from the host, a graph input or
   a producer that can never share S's cluster, and has no other consumer that may be offloaded,
   joins V when every device of V takes S and follows the S->V edges. Moving S into V's cluster
   (Lemma M, successor case) turns S->V transfers internal, and each input tensor of S still has
   exactly one accelerator consuming unit, different from its producer's.
R5 *chains are cut at most once* (``chains``): in a maximal chain v1 -> ... -> vk of fixed-acc
   super-nodes with the same devices (each vi, i<k, has vi+1 as only successor; each vi, i>1, has
   vi-1 as only predecessor; inner nodes read no graph input; every device follows every chain
   edge; no never-together pairs), some optimum cuts at most one chain edge, and then one of least
   bytes; so every other chain edge is contracted. Proof: if two chain edges are cut, take a
   maximal run M = vi..vj (1 < i <= j < k) lying in one cluster between two cut edges; its
   neighbours' clusters L (of vi-1) and R (of vj+1) differ (else the chain would leave L and come
   back). Moving M into L is valid (Lemma M, node by node, each moved node's only predecessor
   being in L) and saves the bytes of vi-1 -> vi (vi-1's tensors go to vi only) while vj -> vj+1
   costs what it did. Repeat until at most one cut is left; moving that cut along the chain to a
   cheapest edge moves inner nodes between L and R (Lemma M again) and changes only the cost of
   the two chain edges involved. Partition counts never grow.
R6 *independent components* (``split``; cut objective, ``min_size <= 1``, offload fixed by R1):
   call two super-nodes *compatible* when they could share a cluster: both offloadable on a common
   device, not a never-together pair, and no path between them through a node or an edge that can
   never be inside a cluster (a cluster holds every path between two of its members; see
   :func:`reachability`). Compatible super-nodes are joined when an edge between them can lie
   inside a cluster or when they consume a common tensor; strongly connected groups of the
   resulting quotient are joined too; each component is then solved alone. Proof: (a) any union of
   valid partitions of the components is valid - clusters stay inside components, the components'
   quotient is a DAG so no path leaves a component and returns, never-together pairs across
   components are apart, groups are single super-nodes; (b) splitting every cluster of an optimum
   along components keeps it valid (a new cycle would either be an old cycle or run through two
   components in both directions) and does not raise cut_bytes: a tensor's consumers that can share
   a unit are in one component, its producer shares a unit with a consumer only through an edge
   that joins their components, and with the fallback set fixed the host unit does not move. So the
   sum of the components' optima is the optimum.
R7 *host nodes at the edges* (``host``; any objective and constraints): a node no device takes,
   outside any together group, whose predecessors are all out of the model already (a source such
   as a weight stub or a Shape of a graph input) - or, scanning backwards, whose successors all
   are - is taken out and left alone on the fallback. It is a host singleton in every partition
   anyway; with no predecessor (or no successor) left in the model it lies on no path between two
   model nodes, so no cycle and no convexity condition involves it; its tensors cost what any
   host tensor costs, so the model treats its outputs like graph inputs and records on its inputs
   that the host consumes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from clusterkit._deprecated import renamed_attribute
from clusterkit.constraints.core import Problem
from clusterkit.graph.algorithms import UnionFind, quotient_edges, topological_order
from clusterkit.graph.core import Graph


@dataclass
class TensorTerm:
    """A non-constant tensor of known positive size, seen from the super-nodes: ``producer`` is a
    super-node or -1 (graph input), ``consumers`` the distinct consuming super-nodes other than the
    producer's, sorted."""

    tensor: int
    nbytes: int
    producer: int
    consumers: tuple[int, ...]
    is_output: bool
    host_consumer: bool = False  # a consumer taken out of the model (R7) runs on the host


@dataclass
class SuperGraph:
    """Super-nodes (sets of original nodes kept in one cluster), topologically numbered.

    ``devices[s]``: accelerator devices that may host ``s`` (bitmask ``dev_mask[s]``);
    ``may_acc``/``may_fb``: whether ``s`` may be offloaded / left on the fallback;
    ``edges[(s, t)]``: bitmask of devices on which every original edge between ``s`` and ``t`` may
    lie inside a cluster (0: the edge is always cut).
    """

    problem: Problem
    members: list[list[int]]
    devices: list[tuple[int, ...]]
    may_acc: list[bool]
    may_fb: list[bool]
    edges: dict[tuple[int, int], int]
    succ: list[list[int]]
    pred: list[list[int]]
    terms: list[TensorTerm]
    never: list[tuple[int, int]]
    in_never: list[bool]
    reads_input: list[bool]
    node_super: np.ndarray
    detached: list[int] = field(default_factory=list)
    """Nodes out of the model, each a singleton cluster on its first device (R2)."""
    on_host: list[int] = field(default_factory=list)
    """Nodes out of the model, each a singleton on the fallback (R7)."""

    @property
    def size(self) -> int:
        return len(self.members)

    def __post_init__(self) -> None:
        self.dev_mask = [sum(1 << d for d in ds) for ds in self.devices]
        """Bitmask of ``devices`` per super-node."""

    def weight(self, s: int) -> int:
        """Number of original nodes in super-node ``s``."""
        return len(self.members[s])


@dataclass
class Reduction:
    """The reduced problem: the super-graph, its independent components (lists of super-nodes, each
    topologically sorted) and what each reduction did."""

    graph: SuperGraph
    components: list[list[int]]
    stats: dict[str, Any]
    fixed_offload: bool

    parts = renamed_attribute("components")  # the old name, deprecated


REDUCTIONS = ("fix", "constants", "host", "leaves", "roots", "chains", "split")


def reduce_problem(problem: Problem, w_parts: float = 0.0, enable: bool | tuple = True,
                   require_offload: bool = False) -> Reduction:
    """Apply the reductions (all when ``enable`` is True, none when False, or the named ones)
    and return the super-graph with its components."""
    on = set(REDUCTIONS) if enable is True else set(enable or ())
    p = problem
    lim = p.limits  # the devices' own limits too
    simple = not lim.any_minimum
    local = simple and not lim.bounded
    stats: dict[str, Any] = {"nodes": p.n}
    detached = _constant_nodes(p) if "constants" in on and simple and w_parts == 0 else []
    stats["constants_detached"] = len(detached)
    on_host = _edge_host_nodes(p, set(detached)) if "host" in on else []
    stats["host_nodes_out"] = len(on_host)
    node_super, members, devices = _group_super_nodes(p, set(detached) | set(on_host))
    may_acc = [bool(ds) for ds in devices]
    fixed = require_offload or ("fix" in on and simple) or not p.devices
    # R1 (or required): offload every super-node a device takes
    may_fb = [not a for a in may_acc] if require_offload or ("fix" in on and simple) \
        else [True] * len(members)
    sg = build_supergraph(p, node_super, members, devices, may_acc, may_fb, detached, on_host)
    stats["fixed_offload"] = fixed
    merged = {"leaves": 0, "roots": 0, "chains": 0}
    if local and fixed and (on & {"leaves", "roots", "chains"}):
        while True:  # R3/R4/R5 to a fixpoint
            changes = _contract_round(sg, on, merged)
            if not changes:
                break
            sg = _apply(sg, changes)
    stats.update({f"merged_{k}": v for k, v in merged.items()})
    stats["super_nodes"] = sg.size
    if "split" in on and simple and fixed and w_parts == 0:
        components = _split(sg)  # R6
    else:
        components = [list(range(sg.size))]
    stats["components"] = len(components)
    stats["largest_component"] = max((len(x) for x in components), default=0)
    stats["parts"], stats["largest_part"] = stats["components"], stats["largest_component"]
    stats["offloadable_super_nodes"] = sum(1 for s in range(sg.size) if sg.may_acc[s])
    return Reduction(sg, components, stats, fixed)


def _constant_nodes(p: Problem) -> list[int]:
    """R2: nodes computing from constants alone, outside together groups."""
    const = p.graph.is_constant_node
    return [v for v in range(p.n) if const[v] and p.group_of[v] < 0]


def _edge_host_nodes(p: Problem, out: set[int]) -> list[int]:
    """R7: host-only nodes outside groups whose predecessors (scanning forwards) or successors
    (scanning backwards) are all out of the model already."""
    g, n = p.graph, p.n
    host_only = (~p.supported.any(axis=0) & (p.group_of < 0)).tolist()
    fixed_host = [h and v not in out for v, h in enumerate(host_only)]
    preds, succs = g.pred_lists, g.succ_lists
    gone = [v in out for v in range(n)]
    on_host: list[int] = []
    for v in range(n):  # sources: every predecessor already out
        if fixed_host[v] and all(gone[u] for u in preds[v]):
            gone[v] = True
            on_host.append(v)
    src = set(on_host)
    for v in range(n - 1, -1, -1):  # sinks: every successor already out
        if fixed_host[v] and v not in src and all(gone[w] for w in succs[v]):
            gone[v] = True
            on_host.append(v)
    return sorted(on_host)


def _group_super_nodes(p: Problem, out: set[int]
                       ) -> tuple[np.ndarray, list[list[int]], list[tuple[int, ...]]]:
    """The first super-nodes: each together group one, every other node in the model alone;
    ``node_super`` is -1 for the nodes ``out`` of the model. Devices: those that take the node,
    or that can host the whole group as one cluster."""
    n = p.n
    uf = UnionFind(n)
    for group in p.groups:
        ids = group.tolist()
        for v in ids[1:]:
            uf.union(ids[0], v)
    live = np.ones(n, dtype=bool)
    live[sorted(out)] = False
    labels = uf.labels()
    _, node_super = np.unique(labels[live], return_inverse=True)
    full = np.full(n, -1, dtype=np.int64)
    full[live] = node_super
    members: list[list[int]] = [[] for _ in range(int(full.max()) + 1 if live.any() else 0)]
    for v in np.flatnonzero(live).tolist():
        members[full[v]].append(v)
    group_devs = {int(p.group_of[ms[0]]): group_devices(p, ms) for ms in members
                  if p.group_of[ms[0]] >= 0}
    sup = p.supported
    devices = [group_devs[int(p.group_of[ms[0]])] if p.group_of[ms[0]] >= 0
               else tuple(d for d in range(len(p.devices)) if sup[d, ms[0]]) for ms in members]
    return full, members, devices


def group_devices(p: Problem, ids: list[int]) -> tuple[int, ...]:
    """Devices that can host a together group as one cluster (all members supported, every
    internal edge followed, constants within the limit)."""
    g = p.graph
    inside = set(ids)
    internal = [e for v in ids for e in range(int(g.succ_ptr[v]), int(g.succ_ptr[v + 1]))
                if int(g.succ_idx[e]) in inside]
    out = []
    for d in range(len(p.devices)):
        if not p.supported[d, ids].all():
            continue
        if any(p.must_cut[e] or not p.edge_ok[d, e] for e in internal):
            continue
        if not p.limits.fits(ids, d, minimum=False):
            continue
        out.append(d)
    return tuple(out)


def build_supergraph(p: Problem, node_super: np.ndarray, members: list[list[int]],
                     devices: list[tuple[int, ...]], may_acc: list[bool], may_fb: list[bool],
                     detached: list[int], on_host: Sequence[int] = ()) -> SuperGraph:
    """Aggregate edges, tensors and never-together pairs over super-nodes, renumbered in a
    topological order (smallest first member first among the ready ones)."""
    g = p.graph
    k = len(members)
    agg = _super_edges(p, node_super)
    pairs = sorted(agg)
    order = topological_order(k, [a for a, _ in pairs], [b for _, b in pairs],
                              key=[min(m) for m in members])
    new_id = [0] * k
    for pos, s in enumerate(order):
        new_id[s] = pos
    members = [sorted(members[s]) for s in order]
    devices = [devices[s] for s in order]
    may_acc = [may_acc[s] for s in order]
    may_fb = [may_fb[s] for s in order]
    node_super = node_super.copy()
    live = node_super >= 0
    node_super[live] = np.asarray(new_id, dtype=np.int64)[node_super[live]]
    edges = {(new_id[a], new_id[b]): m for (a, b), m in agg.items()}
    succ: list[list[int]] = [[] for _ in range(k)]
    pred: list[list[int]] = [[] for _ in range(k)]
    for (a, b) in sorted(edges):
        succ[a].append(b)
        pred[b].append(a)
    ns = node_super.tolist()
    terms, reads_input = _tensor_terms(g, ns, k, on_host)
    never = sorted({(min(ns[a], ns[b]), max(ns[a], ns[b]))
                    for a, b in p.never_pairs.tolist() if ns[a] >= 0 and ns[b] >= 0})
    in_never = [False] * k
    for a, b in p.never_pairs.tolist():
        for v in (a, b):
            if ns[v] >= 0:
                in_never[ns[v]] = True
    return SuperGraph(p, members, devices, may_acc, may_fb, edges, succ, pred, terms, never,
                      in_never, reads_input, node_super, list(detached), sorted(on_host))


def _tensor_terms(g: Graph, ns: list[int], k: int, on_host: Sequence[int]
                  ) -> tuple[list[TensorTerm], list[bool]]:
    """The tensors seen from the super-nodes (``ns``: super-node per node, -1 when out of the
    model) and, per super-node, whether it reads a graph input."""
    tt = g.tensor_table
    terms: list[TensorTerm] = []
    reads_input = [False] * k
    consumers_of: dict[int, list[int]] = {}
    for t, c in zip(tt.inc_tensor.tolist(), tt.inc_node.tolist()):
        consumers_of.setdefault(t, []).append(c)
    free, nbytes = tt.free.tolist(), tt.nbytes.tolist()
    prod, is_out = tt.producer.tolist(), tt.is_output.tolist()
    hosted = set(on_host)
    for t in range(len(tt.names)):
        if free[t] or nbytes[t] <= 0:
            continue
        ps = ns[prod[t]] if prod[t] >= 0 else -1  # -1: graph input or a host node out (R7)
        readers = consumers_of.get(t, ())
        cons = sorted({ns[c] for c in readers if ns[c] >= 0} - {ps})
        if ps < 0:
            for c in cons:
                reads_input[c] = True
        host_consumer = any(c in hosted for c in readers)
        if not cons and not (is_out[t] or host_consumer):
            continue
        terms.append(TensorTerm(t, int(nbytes[t]), ps, tuple(cons), bool(is_out[t]),
                                host_consumer))
    return terms, reads_input


def _super_edges(p: Problem, node_super: np.ndarray) -> dict[tuple[int, int], int]:
    """The edges of the contracted graph (:func:`~clusterkit.graph.algorithms.quotient_edges`
    over the nodes in the model), each with the bitmask of devices on which every original
    edge it stands for may lie inside a cluster."""
    g = p.graph
    nd = len(p.devices)
    src, dst = g.edge_src, g.edge_dst
    live = (node_super[src] >= 0) & (node_super[dst] >= 0)
    src, dst = src[live], dst[live]
    qa, qb = quotient_edges(node_super, src, dst)
    if not len(qa):
        return {}
    ok = np.zeros(len(src), dtype=np.int64)
    if nd:
        okm = (p.edge_ok & ~p.must_cut[None, :])[:, live]
        ok = (okm.astype(np.int64) * (1 << np.arange(nd, dtype=np.int64))[:, None]).sum(axis=0)
    a, b = node_super[src], node_super[dst]
    inner = a != b
    key = a[inner] * max(len(node_super), 1) + b[inner]
    order = np.argsort(key, kind="stable")
    key, ok = key[order], ok[inner][order]
    starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    masks = np.bitwise_and.reduceat(ok, starts)
    return {(int(x), int(y)): int(m) for x, y, m in zip(qa.tolist(), qb.tolist(),
                                                         masks.tolist())}


# ----------------------------------------------------------------------------- contractions
def _fixed_acc(sg: SuperGraph, s: int) -> bool:
    return sg.may_acc[s] and not sg.may_fb[s]


def _fixed_host(sg: SuperGraph, s: int) -> bool:
    return not sg.may_acc[s]


def _contract_round(sg: SuperGraph, on: set, merged: dict) -> list[tuple[int, int]]:
    """One round of R5 (chains), then R3/R4 on super-nodes no earlier merge of the round
    touched. Returns pairs (absorbed, into)."""
    touched = [False] * sg.size
    out: list[tuple[int, int]] = []
    if "chains" in on:
        out += _chain_merges(sg, touched, merged)
    terms_in: list[list[TensorTerm]] = [[] for _ in range(sg.size)]
    for term in sg.terms:
        for c in term.consumers:
            terms_in[c].append(term)
    for s in range(sg.size):
        if touched[s] or not _fixed_acc(sg, s) or sg.in_never[s]:
            continue
        target = -1
        if "leaves" in on and _joins_producer(sg, s, touched):
            target, kind = sg.pred[s][0], "leaves"
        elif "roots" in on and _joins_consumer(sg, s, touched, terms_in[s]):
            target, kind = sg.succ[s][0], "roots"
        if target >= 0:
            out.append((s, target))
            touched[s] = touched[target] = True
            merged[kind] += 1
    return out


def _chain_link(sg: SuperGraph, a: int, b: int) -> bool:
    """Is ``a -> b`` a link of an R5 chain?"""
    masks = sg.dev_mask
    return (len(sg.succ[a]) == 1 and sg.succ[a][0] == b and len(sg.pred[b]) == 1
            and _fixed_acc(sg, a) and _fixed_acc(sg, b) and not sg.in_never[a]
            and not sg.in_never[b] and sg.devices[a] == sg.devices[b]
            and sg.edges[(a, b)] & masks[a] == masks[a])


def _chain_merges(sg: SuperGraph, touched: list[bool], merged: dict) -> list[tuple[int, int]]:
    """R5: in each maximal chain (split at inner nodes that read a graph input) every link
    but one of least bytes is contracted; the chain's nodes are marked ``touched``."""
    k = sg.size
    out_bytes: dict[int, dict[int, int]] = {}
    for term in sg.terms:
        if term.producer >= 0:
            row = out_bytes.setdefault(term.producer, {})
            for c in term.consumers:
                row[c] = row.get(c, 0) + term.nbytes
    nxt = [sg.succ[a][0] if sg.succ[a] and _chain_link(sg, a, sg.succ[a][0]) else -1
           for a in range(k)]
    has_prev = [False] * k
    for a in range(k):
        if nxt[a] >= 0:
            has_prev[nxt[a]] = True
    out: list[tuple[int, int]] = []
    for start in range(k):
        if has_prev[start] or nxt[start] < 0:
            continue
        chain = [start]
        while nxt[chain[-1]] >= 0:
            chain.append(nxt[chain[-1]])
        # an inner node must read no graph input: split the chain at such nodes (they become
        # the ends of two chains, each reduced on its own)
        cuts = [i for i in range(1, len(chain) - 1) if sg.reads_input[chain[i]]]
        bounds = [0] + cuts + [len(chain) - 1]
        for lo, hi in zip(bounds, bounds[1:]):
            seg = chain[lo:hi + 1]
            if len(seg) < 3:
                continue
            keep = int(np.argmin([out_bytes.get(a, {}).get(b, 0)
                                  for a, b in zip(seg, seg[1:])]))
            for i, (a, b) in enumerate(zip(seg, seg[1:])):
                if i != keep:
                    out.append((b, a))
                    merged["chains"] += 1
        for s in chain:
            touched[s] = True
    return out


def _joins_producer(sg: SuperGraph, s: int, touched: list[bool]) -> bool:
    """R3: ``s`` (fixed acc, in no never pair) joins its only predecessor."""
    if len(sg.pred[s]) != 1 or sg.reads_input[s]:
        return False
    u, masks = sg.pred[s][0], sg.dev_mask
    return (not touched[u] and _fixed_acc(sg, u)
            and all(_fixed_host(sg, w) for w in sg.succ[s])
            and masks[u] & masks[s] == masks[u]
            and sg.edges[(u, s)] & masks[u] == masks[u]
            and not sg.in_never[u])


def _joins_consumer(sg: SuperGraph, s: int, touched: list[bool], terms_in: list[TensorTerm]
                    ) -> bool:
    """R4: ``s`` (fixed acc, in no never pair) joins its only successor."""
    if len(sg.succ[s]) != 1:
        return False
    v, masks = sg.succ[s][0], sg.dev_mask
    if touched[v] or not _fixed_acc(sg, v) or sg.in_never[v]:
        return False
    if masks[v] & masks[s] != masks[v] or sg.edges[(s, v)] & masks[v] != masks[v]:
        return False
    for term in terms_in:
        pr = term.producer
        if pr >= 0 and not _fixed_host(sg, pr) and sg.edges.get((pr, s), 0) != 0:
            return False
        if any(c != s and not _fixed_host(sg, c) for c in term.consumers):
            return False
    return True


def _apply(sg: SuperGraph, pairs: list[tuple[int, int]]) -> SuperGraph:
    """Merge super-nodes (absorbed into target, chains resolved through union-find)."""
    k = sg.size
    uf = UnionFind(k)
    for a, b in pairs:
        uf.union(a, b)
    remap = uf.labels().tolist()
    count = max(remap, default=-1) + 1
    members: list[list[int]] = [[] for _ in range(count)]
    devices: list[tuple[int, ...] | None] = [None] * count
    may_acc = [True] * count
    may_fb = [True] * count
    for s in range(k):
        t = remap[s]
        members[t].extend(sg.members[s])
        ds = set(sg.devices[s])
        devices[t] = tuple(sorted(ds if devices[t] is None else ds & set(devices[t])))
        may_acc[t] = may_acc[t] and sg.may_acc[s]
        may_fb[t] = may_fb[t] and sg.may_fb[s]
    node_super = sg.node_super.copy()
    live = node_super >= 0
    node_super[live] = np.asarray(remap, dtype=np.int64)[node_super[live]]
    return build_supergraph(sg.problem, node_super, members, [d or () for d in devices],
                            may_acc, may_fb, sg.detached, sg.on_host)


# ----------------------------------------------------------------------------- components (R6)
def _split(sg: SuperGraph) -> list[list[int]]:
    """Independent components (R6), each a sorted list of super-nodes."""
    k = sg.size
    if k == 0:
        return []
    uf = UnionFind(k)
    masks = sg.dev_mask
    full, blocked = reachability(sg)
    never = set(sg.never)
    for (a, b), m in sg.edges.items():
        if m & masks[a] & masks[b] and mergeable(sg, a, b, full, blocked, never):
            uf.union(a, b)
    for term in sg.terms:
        cons = [c for c in term.consumers if sg.may_acc[c]]
        for i, a in enumerate(cons):
            for b in cons[i + 1:]:
                if not uf.connected(a, b) and mergeable(sg, a, b, full, blocked, never):
                    uf.union(a, b)
    comp = uf.labels()
    m = int(comp.max()) + 1
    pairs = sorted(sg.edges)
    rows, cols = quotient_edges(comp, np.asarray([a for a, _ in pairs], dtype=np.int64),
                                np.asarray([b for _, b in pairs], dtype=np.int64))
    if len(rows):  # strongly connected groups of the quotient
        mat = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(m, m)).tocsr()
        _, scc = connected_components(mat, directed=True, connection="strong")
        scc = scc.tolist()
    else:
        scc = list(range(m))
    comp = comp.tolist()
    groups: dict[int, list[int]] = {}
    for s in range(k):
        groups.setdefault(scc[comp[s]], []).append(s)
    return sorted((sorted(v) for v in groups.values()), key=lambda x: x[0])


def reachability(sg: SuperGraph) -> tuple[list[int], list[int]]:
    """Descendant bitsets per super-node: ``full`` over every path, ``blocked`` over paths that
    contain an element that can never lie inside a cluster - a super-node that cannot be
    offloaded, or an edge no common device may keep inside (must-cut, refused by the selector,
    no shared device). Two super-nodes joined by a blocked path never share a cluster: a cluster
    holds every path between two of its members (convexity)."""
    k = sg.size
    full = [0] * k
    blocked = [0] * k
    masks = sg.dev_mask
    for s in range(k - 1, -1, -1):
        f = 0
        b = 0
        for t in sg.succ[s]:
            bit = 1 << t
            f |= bit | full[t]
            if sg.edges[(s, t)] & masks[s] & masks[t] and sg.may_acc[s] and sg.may_acc[t]:
                b |= blocked[t]
            else:
                b |= bit | full[t]
        full[s] = f
        blocked[s] = b
    return full, blocked


def mergeable(sg: SuperGraph, a: int, b: int, full: list[int], blocked: list[int],
              never: set) -> bool:
    """Could super-nodes ``a`` and ``b`` ever share a cluster? (A necessary condition: both may
    be offloaded on a common device, not a never-together pair, and no blocked path between
    them - see :func:`reachability`.)"""
    if a > b:
        a, b = b, a
    if not (sg.may_acc[a] and sg.may_acc[b]):
        return False
    if not (set(sg.devices[a]) & set(sg.devices[b])):
        return False
    if (a, b) in never:
        return False
    return not (blocked[a] >> b) & 1
