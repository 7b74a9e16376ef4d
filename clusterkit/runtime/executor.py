"""Run a fused graph heterogeneously.

Every fused node is one *step* compiled by its device's backend (default ``onnxruntime``,
restricted to the op set of the device's selector). The ordinary (fallback) nodes run on the host
backend, grouped into as few steps as possible: the nodes are scheduled in a topological order
that switches between host nodes and fused nodes as rarely as it can (:func:`phase_order`), and
every maximal run of host nodes in that order becomes one step, and so does every maximal run
of fused nodes of one device (``merge_steps``). Constant nodes (weight stubs and
what is computed from them) are never scheduled: each step computes the constants it reads
itself, once, when it is compiled. When the graph inputs have static shapes, the values those
shapes fix (a Reshape's target computed with Shape/Gather/Concat, masks built from shapes) are
found once, the way onnxruntime folds them in a whole model, and handed to the steps as
constants; nodes that only compute such values never run, steps nobody reads are dropped, and a
step left without inputs runs once, at the first run. The executor moves the tensors between
steps in the backends' own form (``onnxruntime.OrtValue`` from session to session: no numpy
conversion, no copy), frees them after their last reader, and keeps per-step timings and (with
the backends' ``perf_counts``) per-node counters. A step whose compile fails on its device falls
back to the host and is reported in :attr:`Executor.fallbacks`.
"""

from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Mapping

import numpy as np

from clusterkit._deprecated import module_getattr, renamed_attribute, renamed_keywords
from clusterkit.constraints.acceptance import acceptance
from clusterkit.errors import BackendError, ClusterkitError, ExecutionError
from clusterkit.fusion import (
    FusedGraph,
    StaticInfo,
    initializer_map,
    required_inputs,
    root_of,
    runtime_outputs,
    source_model,
)
from clusterkit.graph.core import _NONDETERMINISTIC as _RANDOM_OPS
from clusterkit.graph.core import Graph
from clusterkit.graph.subgraph import Subgraph
from clusterkit.runtime.backends import (
    Backend,
    CompiledSubgraph,
    backend_names,
    get_backend,
    parse_backend_spec,
)
from clusterkit.runtime.backends.base import NUMPY_VALUES, TOLERANCES, ValueKind
from clusterkit.runtime.refusals import carve_refused

#: size given to a symbolic (dynamic) dimension of a graph input that is not a batch dimension
DEFAULT_DIM = 16
#: integer inputs (ids) are drawn from ``range(INT_HIGH)``; masks are ones, type ids zeros
INT_HIGH = 100


def phase_order(preds: list[list[int]], succs: list[list[int]], live: list[bool],
                host: list[bool], start_host: bool = True) -> list[int]:
    """A topological order of the ``live`` nodes that switches between host nodes and the others
    as rarely as it can: it takes ready nodes of the current kind (lowest index first) until none
    is ready, then switches kind, starting with host nodes when ``start_host``. No order that
    starts with the same kind has fewer runs of host nodes: after k runs, the greedy order has
    taken every node any such order has taken after k runs."""
    n = len(live)
    indeg = [sum(1 for u in preds[v] if live[u]) if live[v] else 0 for v in range(n)]
    queues: dict[bool, list[int]] = {True: [], False: []}
    for v in range(n):
        if live[v] and indeg[v] == 0:
            queues[host[v]].append(v)
    for q in queues.values():
        heapq.heapify(q)
    order: list[int] = []
    phase = start_host
    while queues[True] or queues[False]:
        if not queues[phase]:
            phase = not phase
        v = heapq.heappop(queues[phase])
        order.append(v)
        for w in succs[v]:
            if live[w]:
                indeg[w] -= 1
                if indeg[w] == 0:
                    heapq.heappush(queues[host[w]], w)
    return order


def _copy_of(to_numpy, value) -> np.ndarray:
    return np.array(to_numpy(value), copy=True)


#: ops whose outputs may differ from run to run, and ops with bodies (not looked into)
NONDETERMINISTIC = frozenset(_RANDOM_OPS | {"Dropout", "If", "Loop", "Scan"})


def deterministic(root: Graph, step: "Step") -> bool:
    """Does ``step`` compute the same outputs from the same inputs at every run?"""
    nodes = [root.nodes[v] for v in step.subgraph.nodes]
    return not any(nd.op_type in NONDETERMINISTIC or nd.implicit_inputs for nd in nodes)


def host_runs(order: list[int], host: list[bool]) -> int:
    """How many maximal runs of host nodes ``order`` has."""
    return sum(1 for k, v in enumerate(order) if host[v] and (k == 0 or not host[order[k - 1]]))


@dataclass
class Step:
    """One thing the executor compiles and runs in its schedule: a fused node (or several
    consecutive ones of one device, merged), a run of host nodes, or the graph outputs fixed
    before any run."""

    name: str
    kind: str  # "subgraph" (a fused node), "host" (a run of ordinary nodes), "constants"
    device: str
    backend: str
    subgraph: Subgraph  # of the original graph
    inputs: list[str]
    outputs: list[str]
    compiled: CompiledSubgraph | None = None
    compile_seconds: float = 0.0
    fallback_reason: str | None = None
    #: what executed it: an onnxruntime execution provider's name, or the backend's
    runs_on: str = ""
    runs: int = 0
    total_seconds: float = 0.0
    last_seconds: float = 0.0
    bytes_in: int = 0
    bytes_out: int = 0
    release: list[str] = field(default_factory=list)
    #: the per-fused-node steps a merged step stands for (empty: not merged)
    parts: list["Step"] = field(default_factory=list, repr=False)
    # wiring of the run loop (set once the steps are compiled): value slots of the inputs and
    # outputs, converters between value kinds (None: the producer's kind), slots to free
    in_slots: list[int] = field(default_factory=list, repr=False)
    out_slots: list[int] = field(default_factory=list, repr=False)
    converters: list[Any] = field(default_factory=list, repr=False)
    free_slots: list[int] = field(default_factory=list, repr=False)

    def timing(self) -> dict[str, Any]:
        """Per-step counters (JSON-ready)."""
        return {"name": self.name, "kind": self.kind, "device": self.device,
                "backend": self.backend, "ep": self.runs_on, "nodes": len(self.subgraph.nodes),
                "inputs": len(self.inputs), "outputs": len(self.outputs),
                "compile_seconds": self.compile_seconds, "runs": self.runs,
                "total_seconds": self.total_seconds,
                "mean_seconds": self.total_seconds / self.runs if self.runs else 0.0,
                "last_seconds": self.last_seconds, "bytes_in": self.bytes_in,
                "bytes_out": self.bytes_out, "fell_back": self.fallback_reason is not None,
                "fallback_reason": self.fallback_reason}


class Executor:
    """Compile and run a (fused) graph read from ONNX as a schedule of steps (:attr:`steps`,
    each a :class:`Step`).

    ``backends`` maps a device name to a backend name or instance (default ``onnxruntime`` for
    every device); ``host`` is the backend of the ordinary nodes and of clusters whose compile
    failed; ``backend_config`` maps a backend name to config keys for the backends made by name
    (``{"onnxruntime": {"intra_op_num_threads": 1}}``). With ``fold_static`` (the default) and
    static input shapes, the values the shapes fix (a Reshape's computed target shape, masks
    built from shapes:
    :func:`clusterkit.runtime.backends.onnxruntime_backend.static_info`) are given to the steps
    that read them, as onnxruntime folds them in a whole model, instead of being computed and
    moved at every run. With ``merge_steps`` (the default), fused nodes of one device that come
    one after another in the schedule run as one step (one compiled subgraph instead of several;
    split again if the device cannot compile the union)."""

    units = renamed_attribute("steps")

    @renamed_keywords(merge_units="merge_steps")
    def __init__(self, graph: Graph, backends: Mapping[str, Backend | str] | None = None,
                 host: Backend | str = "onnxruntime",
                 backend_config: Mapping[str, Mapping[str, Any]] | None = None,
                 host_device: str | None = None, fold_static: bool = True,
                 merge_steps: bool = True):
        self.graph = graph
        self.fold_static = fold_static
        self.merge_steps = merge_steps
        self.root = root_of(graph)
        source_model(self.root)  # only ONNX graphs run
        self.backend_config = {k: dict(v) for k, v in (backend_config or {}).items()}
        unknown = sorted(set(self.backend_config) - set(backend_names()))
        if unknown:
            raise BackendError(f"config for unknown backend {unknown[0]!r} (backends: "
                               f"{', '.join(backend_names())})")
        fused = graph.fused if isinstance(graph, FusedGraph) else [None] * graph.n
        props = graph.properties if isinstance(graph, FusedGraph) else {}
        if host_device is None:
            host_device = (graph.partition.problem.fallback if isinstance(graph, FusedGraph)
                           else "cpu")
        self.host_device = host_device
        self.host = self._make_backend(host, host_device, None)
        self.backends: dict[str, Backend] = {}
        wanted = dict(backends or {})
        for f in fused:
            if f is None or f.subgraph.device in self.backends:
                continue
            dev = f.subgraph.device
            self.backends[dev] = self._make_backend(wanted.get(dev, "onnxruntime"), dev,
                                                    props.get(dev))
        self.fallbacks: list[dict[str, Any]] = []
        #: what became of each cluster of the partition: compiled (in which step), split
        #: (into how many pieces, how many nodes fell back) or fallen back, with the reason
        self.clusters: list[dict[str, Any]] = []
        self.static: StaticInfo | None = None
        if fold_static:
            from clusterkit.runtime.backends.onnxruntime_backend import static_info

            self.static = static_info(self.root)
        self.steps: list[Step] = self._plan(fused)
        self.constant_outputs: dict[str, np.ndarray] = {}
        self._compile_all()
        self._wire()
        self.last_run_seconds = 0.0

    # ------------------------------------------------------------------ setup
    def _make_backend(self, spec: Backend | str, device: str, prop) -> Backend:
        if isinstance(spec, Backend):
            return spec
        return get_backend(spec, device=device, restrict=prop,
                           config=self.backend_config.get(parse_backend_spec(spec)[0]))

    def _plan(self, fused: list) -> list[Step]:
        g, root = self.graph, self.root
        fixed = {t for t, ten in root.tensors.items() if ten.is_constant}
        if self.static is not None:
            fixed.update(self.static.values)
        live = [any(o and o not in fixed for o in nd.outputs) for nd in g.nodes]
        host = [f is None for f in fused]
        order = min((phase_order(g.pred_lists, g.succ_lists, live, host, start)
                     for start in (True, False)), key=lambda o: host_runs(o, host))
        if len(order) != sum(live):  # pragma: no cover - the graph is a DAG
            raise ExecutionError("internal: could not schedule every node")
        members = g.members if isinstance(g, FusedGraph) else [[v] for v in range(g.n)]
        steps: list[Step] = []
        segment: list[int] = []

        def close_segment() -> None:
            if segment:
                nodes = sorted(m for v in segment for m in members[v])
                sub = Subgraph.from_nodes(root, nodes, self.host_device, len(steps))
                steps.append(Step(f"{self.host_device}_segment_{len(steps)}", "host",
                                  self.host_device, self.host.name, sub, *self._io(sub)))
                segment.clear()

        for v in order:
            if fused[v] is None:
                segment.append(v)
                continue
            close_segment()
            dev = fused[v].subgraph.device
            sub = Subgraph.from_nodes(root, members[v], dev, fused[v].subgraph.cluster_id)
            steps.append(Step(g.nodes[v].name, "subgraph", dev, self.backends[dev].name, sub,
                              *self._io(sub)))
        close_segment()
        steps = self._prune(steps)
        return self._merge_adjacent(steps) if self.merge_steps else steps

    def _merge_adjacent(self, steps: list[Step]) -> list[Step]:
        """Each run of consecutive fused steps on the same device becomes one step (one
        session instead of several). Consecutive in a topological order, their union reads only
        tensors made before it; a merged step that its device cannot compile is split again."""
        groups: list[list[Step]] = []
        for u in steps:
            last = groups[-1][-1] if groups else None
            if (last is not None and u.kind == last.kind == "subgraph"
                    and u.device == last.device and self._mergeable(groups[-1], u)):
                groups[-1].append(u)
            else:
                groups.append([u])
        out = []
        for parts in groups:
            if len(parts) == 1:
                out.append(parts[0])
                continue
            first = parts[0]
            nodes = sorted(v for p in parts for v in p.subgraph.nodes)
            sub = Subgraph.from_nodes(self.root, nodes, first.device, first.subgraph.cluster_id)
            wanted = {t for p in parts for t in p.outputs}  # what the parts must give
            outs = [t for t in runtime_outputs(sub, self.static) if t in wanted]
            out.append(Step(f"{first.name}..{parts[-1].name}", "subgraph", first.device,
                            first.backend, sub, required_inputs(sub, outs, self.static), outs,
                            parts=parts))
        return out

    def _mergeable(self, group: list[Step], u: Step) -> bool:
        """May ``u`` join the merged step of ``group``? Only when the union is acceptable to
        the device (its selector, limits and ``create_subgraph_node``: the selector contract
        of a cluster)."""
        problem = self._problem()
        if problem is None or u.device not in problem.devices:
            return False
        nodes = sorted(v for p in [*group, u] for v in p.subgraph.nodes)
        return acceptance(problem).verdict(nodes, problem.devices.index(u.device)) is None

    def _problem(self):
        """The partitioned problem, when its node ids are the steps' (None for a graph that
        was not fused, or a fused graph fused again)."""
        if not isinstance(self.graph, FusedGraph):
            return None
        problem = self.graph.partition.problem
        return problem if problem.graph is self.root else None

    def _keep_needed(self, steps: list[Step], needed: set[str]) -> list[Step]:
        """Walking back from ``needed``: keep the outputs someone reads, drop the steps nobody
        needs, and narrow each step's inputs to what its kept outputs read."""
        kept: list[Step] = []
        for u in reversed(steps):
            u.outputs = [t for t in u.outputs if t in needed]
            if not u.outputs:
                continue
            u.inputs = required_inputs(u.subgraph, u.outputs, self.static)
            needed.update(u.inputs)
            kept.append(u)
        return kept[::-1]

    def _prune(self, steps: list[Step]) -> list[Step]:
        """Keep the outputs someone reads and drop the steps nobody needs (dead code, static
        values); add a step computing the graph outputs fixed before any run."""
        g = self.graph
        steps = self._keep_needed(steps, set(g.outputs))
        produced = {t for u in steps for t in u.outputs} | set(g.inputs)
        inits = initializer_map(self.root)
        known = self.static.values if self.static is not None else {}
        missing = [t for t in g.outputs if t not in produced and t not in inits and t not in known]
        if missing:  # graph outputs fixed before any run: computed by their closure
            sub = Subgraph(self.root, [], self.host_device, len(steps), [], list(missing),
                           list(missing))
            steps.append(Step(f"{self.host_device}_constants", "constants", self.host_device,
                              self.host.name, sub, [], list(missing)))
        return steps

    def _io(self, sub: Subgraph) -> tuple[list[str], list[str]]:
        outs = runtime_outputs(sub, self.static)
        return required_inputs(sub, outs, self.static), outs

    def _compile_all(self) -> None:
        from onnx import numpy_helper

        done: list[Step] = []
        for u in self.steps:
            if u.parts and not self._compile_merged(u):
                for p in self._keep_needed(u.parts, set(u.outputs)):
                    done.extend(self._compile_step(p))
                continue
            done.extend([u] if u.compiled is not None else self._compile_step(u))
        self.steps = done
        inits = initializer_map(self.root)
        known = self.static.values if self.static is not None else {}
        produced = {t for u in self.steps for t in u.outputs}
        for t in self.graph.outputs:
            if t not in produced and t not in self.graph.inputs and (t in inits or t in known):
                self.constant_outputs[t] = numpy_helper.to_array(inits[t] if t in inits
                                                                else known[t])

    def _compile_merged(self, u: Step) -> bool:
        """Compile a merged step on its device; False if the device refuses it."""
        try:
            self._compile_on(u, self.backends[u.device])
        except Exception:
            return False
        self._record(u, "compiled", steps=[u.name])
        return True

    def _compile_on(self, u: Step, backend: Backend) -> None:
        """Compile ``u`` with ``backend`` (raising what it raises) and note what ran it."""
        u.compiled = backend.compile(u.subgraph, name=u.name, static=self.static,
                                     outputs=u.outputs)
        u.compile_seconds = u.compiled.compile_seconds
        u.runs_on = u.compiled.runs_on or backend.runs_on()  # the runtime's record first

    def _compile_step(self, u: Step) -> list[Step]:
        """Compile ``u`` on its backend: ``[u]``, or for a fused step its device refuses, the
        steps it is carved into (:meth:`_carve`)."""
        try:
            self._compile_on(u, self.backends[u.device] if u.kind == "subgraph" else self.host)
        except Exception as exc:
            if u.kind != "subgraph":
                raise ExecutionError(f"the host backend {self.host.name!r} cannot compile "
                                     f"{u.name!r}: {exc}") from exc
            return self._carve(u, exc)
        if u.kind == "subgraph":
            self._record(u, "compiled", steps=[u.name])
        return [u]

    def _carve(self, u: Step, exc: Exception) -> list[Step]:
        """The steps of a fused step its device refused to compile: the pieces the device
        compiles (:func:`clusterkit.runtime.refusals.carve_refused`) and host steps for the
        nodes no piece holds, in an order every edge between them follows."""
        reason = str(exc) if isinstance(exc, ClusterkitError) else f"{type(exc).__name__}: {exc}"
        problem = self._problem()
        if problem is None or u.device not in problem.devices:
            return self._fall_back(u, reason)
        needed = set(u.outputs) | {t for v in u.subgraph.nodes
                                   for t in self.root.nodes[v].all_inputs()}
        names = itertools.count()

        def compile_piece(nodes: list[int]) -> Step:
            piece = self._step_of(nodes, u, needed, f"{u.name}.piece{next(names)}", "subgraph")
            self._compile_on(piece, self.backends[u.device])
            return piece

        by_name = {self.root.nodes[v].name: v for v in u.subgraph.nodes}
        untaken = [by_name[n] for n in getattr(exc, "untaken", []) if n in by_name]
        carved = carve_refused(problem, u.device, list(u.subgraph.nodes), reason, compile_piece,
                               untaken)
        out: list[Step] = []
        host: list[int] = []
        for nodes, piece in carved.units + [([], None)]:
            if piece is None and nodes:
                host.extend(nodes)
                continue
            if host:
                out.extend(self._fall_back(self._step_of(host, u, needed, f"{u.name}.host"
                                                         f"{len(out)}", "host"),
                                           carved.fallen[host[0]], record=False))
                host = []
            if piece is not None:
                out.append(piece)  # type: ignore[arg-type]
        self._record(u, "split" if carved.pieces else "fell back", steps=[p.name for p in out],
                     pieces=carved.pieces, fallen=len(carved.fallen), reason=reason)
        return out

    def _step_of(self, nodes: list[int], u: Step, needed: set[str], name: str,
                 kind: str) -> Step:
        """A step of ``u``'s device over ``nodes`` (of ``u``), giving what ``needed`` holds."""
        sub = Subgraph.from_nodes(self.root, nodes, u.device, u.subgraph.cluster_id)
        outs = [t for t in runtime_outputs(sub, self.static) if t in needed]
        return Step(name, kind, u.device, u.backend, sub,
                    required_inputs(sub, outs, self.static), outs)

    def _fall_back(self, u: Step, reason: str, record: bool = True) -> list[Step]:
        """``u`` compiled on the host instead of its device, for ``reason``."""
        u.fallback_reason = reason
        self.fallbacks.append({"step": u.name, "unit": u.name, "device": u.device,
                               "backend": u.backend, "error": reason})
        try:
            self._compile_on(u, self.host)
        except Exception as exc2:
            raise ExecutionError(f"subgraph {u.name!r} failed to compile on device "
                                 f"{u.device!r} ({reason}) and on the host ({exc2})") from exc2
        if record:
            self._record(u, "fell back", steps=[u.name], fallen=len(u.subgraph.nodes),
                         reason=reason)
        u.backend, u.device = self.host.name, self.host_device
        return [u]

    def _record(self, u: Step, verdict: str, **facts: Any) -> None:
        """What became of the partition's clusters behind ``u`` (one entry each)."""
        for part in u.parts or [u]:
            self.clusters.append({"cluster": part.name, "device": part.device,
                                  "nodes": len(part.subgraph.nodes), "verdict": verdict,
                                  "pieces": 1 if verdict == "compiled" else 0, "fallen": 0,
                                  "reason": None, **facts})

    def _release_after_last_reader(self) -> None:
        """Each tensor (but the graph outputs) is freed by the last step reading it."""
        last: dict[str, Step] = {}
        for u in self.steps:
            u.release = []
            for t in u.inputs:
                last[t] = u
        keep = set(self.graph.outputs)
        for t, u in last.items():
            if t not in keep:
                u.release.append(t)

    def _wire(self) -> None:
        """Number the tensors that move between steps (value slots) and give each step the
        slots it reads, writes and frees, and the converters its inputs need: a tensor stays in
        the value kind of the step that made it (an OrtValue between onnxruntime sessions) and
        is converted only for a reader of another kind."""
        slot: dict[str, int] = {t: k for k, t in enumerate(self.graph.inputs)}
        kind: dict[str, ValueKind] = {t: NUMPY_VALUES for t in self.graph.inputs}
        self._release_after_last_reader()
        for u in self.steps:
            assert u.compiled is not None  # _compile_all compiled every step
            vk = u.compiled.value_kind
            u.in_slots = [slot[t] for t in u.inputs]
            u.converters = [kind[t].converter(vk) for t in u.inputs]
            u.out_slots = []
            for t in u.outputs:
                slot[t] = len(slot)
                kind[t] = vk
                u.out_slots.append(slot[t])
            u.free_slots = [slot[t] for t in u.release]
        self._n_slots = len(slot)
        # a step without inputs computes the same values at every run: run it once, keep them
        self._once = [u for u in self.steps if not u.inputs and deterministic(self.root, u)]
        self._loop = [u for u in self.steps if u.inputs or u not in self._once]
        self._fixed: list[tuple[int, Any]] | None = None
        kept = {k for u in self._once for k in u.out_slots}
        for u in self._loop:
            u.free_slots = [k for k in u.free_slots if k not in kept]
        self._fetch: list[tuple[str, int, Callable[[Any], np.ndarray] | None]] = []
        for t in self.graph.outputs:
            if t not in slot:
                self._fetch.append((t, -1, None))
                continue
            to_numpy = kind[t].to_numpy
            if slot[t] in kept:  # the caller may write into what it gets: not into ours
                to_numpy = partial(_copy_of, to_numpy)
            self._fetch.append((t, slot[t], to_numpy))

    # ------------------------------------------------------------------ running
    def run(self, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run once; returns the graph outputs by name."""
        start = time.perf_counter()
        g = self.graph
        if len(feeds) != len(g.inputs) or any(t not in feeds for t in g.inputs):
            self._check_feeds(feeds)
        slots: list[Any] = [None] * self._n_slots
        for k, t in enumerate(g.inputs):
            slots[k] = np.asarray(feeds[t])
        if self._fixed is None:
            for u in self._once:
                self._run_step(u, slots)
            self._fixed = [(k, slots[k]) for u in self._once for k in u.out_slots]
        for k, value in self._fixed:
            slots[k] = value
        for u in self._loop:
            self._run_step(u, slots)
        out = {}
        for t, k, to_numpy in self._fetch:
            out[t] = to_numpy(slots[k]) if to_numpy is not None else self.constant_outputs[t]
        self.last_run_seconds = time.perf_counter() - start
        return out

    def _check_feeds(self, feeds: Mapping[str, Any]) -> None:
        g = self.graph
        missing = [t for t in g.inputs if t not in feeds]
        if missing:
            raise ExecutionError(f"missing graph input {missing[0]!r} (inputs: "
                                 f"{', '.join(g.inputs)})")
        unknown = sorted(set(feeds) - set(g.inputs))
        if unknown:
            raise ExecutionError(f"{unknown[0]!r} is not a graph input (inputs: "
                                 f"{', '.join(g.inputs)})")

    @staticmethod
    def _run_step(u: Step, slots: list[Any]) -> None:
        """Run one step on the values in ``slots``; store its outputs, free what it read last."""
        ins = [slots[k] if c is None else c(slots[k]) for k, c in zip(u.in_slots, u.converters)]
        t0 = time.perf_counter()
        try:
            outs = u.compiled.run_values(ins)  # type: ignore[union-attr]  # compiled: see _wire
        except ClusterkitError as exc:
            raise ExecutionError(f"step {u.name!r} ({u.kind} on {u.device}, backend "
                                 f"{u.backend}) failed: {exc}") from exc
        dt = time.perf_counter() - t0
        u.runs += 1
        u.total_seconds += dt
        u.last_seconds = dt
        nbytes = u.compiled.value_kind.nbytes  # type: ignore[union-attr]  # as above
        u.bytes_in = sum(map(nbytes, ins))
        u.bytes_out = sum(map(nbytes, outs))
        for k, value in zip(u.out_slots, outs):
            slots[k] = value
        for k in u.free_slots:
            slots[k] = None

    __call__ = run

    # ------------------------------------------------------------------ reports
    def timings(self) -> list[dict[str, Any]]:
        """Per-step timings, in execution order."""
        return [u.timing() for u in self.steps]

    def node_timings(self) -> list[dict[str, Any]]:
        """Per-node counters of every step whose backend collected them (config
        ``perf_counts``). For onnxruntime steps this ends profiling: later runs are not
        profiled."""
        out = []
        for u in self.steps:
            for rec in u.compiled.node_timings() if u.compiled is not None else []:
                out.append({"step": u.name, "unit": u.name, **rec})
        return out

    def summary(self) -> str:
        """A few lines for people: the per-step table (whole step names; ``ep``: what ran
        the step)."""
        width = max([4] + [len(u.name) for u in self.steps])
        ep_width = max([2] + [len(u.runs_on) for u in self.steps])
        rows = [f"{'step':{width}s} {'kind':9s} {'device':10s} {'ep':{ep_width}s} {'nodes':>6s} "
                f"{'compile ms':>10s} {'run ms':>9s}"]
        for u in self.steps:
            mean = u.total_seconds / u.runs * 1e3 if u.runs else 0.0
            flag = "  (fell back: compile failed)" if u.fallback_reason else ""
            rows.append(f"{u.name:{width}s} {u.kind:9s} {u.device[:10]:10s} "
                        f"{u.runs_on:{ep_width}s} {len(u.subgraph.nodes):6d} "
                        f"{u.compile_seconds * 1e3:10.1f} {mean:9.3f}{flag}")
        return "\n".join(rows)

    def tolerance(self) -> tuple[float, float]:
        """(rtol, atol) a comparison of this run's outputs with onnxruntime's CPU provider
        allows: the loosest of its steps' backends (:data:`TOLERANCES` by their precision)."""
        found = [TOLERANCES[u.compiled.backend.precision] for u in self.steps if u.compiled]
        return (max(r for r, _ in found), max(a for _, a in found)) if found else TOLERANCES["fp32"]


__getattr__ = module_getattr(__name__, {"Unit": "Step"}, globals())


# ---------------------------------------------------------------------- inputs and checks
def concrete_shape(tensor_name: str, shape: tuple | None, dims: Mapping[str, int] | None = None,
                   default: int = DEFAULT_DIM) -> tuple[int, ...]:
    """A concrete shape: symbolic dims from ``dims`` by name, else 1 for the first axis or a
    name mentioning 'batch', else ``default``."""
    if shape is None:
        raise ExecutionError(f"graph input {tensor_name!r} has no known shape; give its dims")
    dims = dims or {}
    out = []
    for i, d in enumerate(shape):
        if isinstance(d, int) and d >= 0:
            out.append(d)
        elif isinstance(d, str) and d in dims:
            out.append(int(dims[d]))
        elif i == 0 or (isinstance(d, str) and "batch" in d.lower()):
            out.append(1)
        else:
            out.append(default)
    return tuple(out)


def random_inputs(graph: Graph, seed: int = 0, dims: Mapping[str, int] | None = None,
                  default_dim: int = DEFAULT_DIM) -> dict[str, np.ndarray]:
    """Random values for the graph inputs (fixed ``seed``): floats standard normal; integers in
    ``0..INT_HIGH-1`` except masks (ones) and type ids (zeros); bools true."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in graph.inputs:
        t = graph.tensors[name]
        if t.dtype is None:
            raise ExecutionError(f"graph input {name!r} has no known type")
        shape = concrete_shape(name, t.shape, dims, default_dim)
        dt = np.dtype(t.dtype)
        low = name.lower()
        if dt.kind == "f":
            out[name] = rng.standard_normal(shape).astype(dt)
        elif dt.kind in "iu":
            if "mask" in low:
                out[name] = np.ones(shape, dtype=dt)
            elif "type" in low:
                out[name] = np.zeros(shape, dtype=dt)
            else:
                out[name] = rng.integers(0, INT_HIGH, size=shape).astype(dt)
        elif dt.kind == "b":
            out[name] = np.ones(shape, dtype=dt)
        else:
            raise ExecutionError(f"graph input {name!r} has type {t.dtype}, which random_inputs "
                                 "cannot make")
    return out


def _whole_session(model: Any, config: Mapping[str, Any] | None):
    import onnx
    import onnxruntime as ort

    from clusterkit.runtime.backends.onnxruntime_backend import OnnxRuntimeBackend

    backend = OnnxRuntimeBackend(device="reference_run", config=config)
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    try:
        return ort.InferenceSession(data, backend.session_options(),
                                    providers=list(backend.get_config("providers")))
    except Exception as exc:  # onnxruntime's own types: an op it has no kernel for, ...
        name = getattr(getattr(model, "graph", None), "name", None) or str(model)
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise BackendError(f"onnxruntime cannot run the model {name!r}: {text}") from None


def run_model(model: Any, feeds: Mapping[str, np.ndarray],
              config: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """Run a whole ONNX model (ModelProto or path) in one onnxruntime session built with the
    onnxruntime backend's ``config``; outputs by name."""
    sess = _whole_session(model, config)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, dict(feeds))))


def time_model(model: Any, feeds: Mapping[str, np.ndarray],
               config: Mapping[str, Any] | None = None, runs: int = 1) -> float:
    """Mean seconds of a run of the whole model in one onnxruntime session built with the
    onnxruntime backend's ``config`` (after one warm-up run)."""
    sess = _whole_session(model, config)
    names = [o.name for o in sess.get_outputs()]
    feeds = dict(feeds)
    sess.run(names, feeds)
    start = time.perf_counter()
    for _ in range(max(1, runs)):
        sess.run(names, feeds)
    return (time.perf_counter() - start) / max(1, runs)


def compare_outputs(expected: Mapping[str, np.ndarray], actual: Mapping[str, np.ndarray],
                    rtol: float = 1e-4, atol: float = 1e-5) -> dict[str, Any]:
    """``{"max_abs_diff", "max_rel_diff", "outputs_match", "outputs": [{"name", "max_abs_diff",
    "max_rel_diff", "match"}]}``; outputs match when names, shapes and dtypes agree and values
    are close (``np.allclose`` with ``rtol``/``atol``, NaNs equal). ``max_rel_diff`` is the
    largest absolute difference relative to the output's largest magnitude (an output of zeros:
    the absolute difference)."""
    per: list[dict[str, Any]] = []
    worst = 0.0
    ok = set(expected) == set(actual)
    for name in expected:
        e = np.asarray(expected[name])
        a = np.asarray(actual.get(name)) if name in actual else None
        if a is None or a.shape != e.shape or a.dtype != e.dtype:
            per.append({"name": name, "max_abs_diff": float("inf"),
                        "max_rel_diff": float("inf"), "match": False})
            worst, ok = float("inf"), False
            continue
        if e.dtype.kind in "fc":
            both_nan = np.isnan(e) & np.isnan(a)
            diff = np.where(both_nan, 0.0, np.abs(e.astype(np.float64) - a.astype(np.float64)))
            d = float(np.nanmax(diff)) if diff.size else 0.0
            if diff.size and np.isnan(diff).any():
                d = float("inf")
            match = bool(np.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True))
        elif e.dtype.kind in "iub":
            diff = np.abs(e.astype(np.float64) - a.astype(np.float64))
            d = float(diff.max()) if diff.size else 0.0
            match = bool(np.array_equal(a, e))
        else:
            d = 0.0 if np.array_equal(a, e) else float("inf")
            match = d == 0.0
        scale = _magnitude(e)
        per.append({"name": name, "max_abs_diff": d,
                    "max_rel_diff": d / scale if scale > 0 else d, "match": match})
        worst = max(worst, d)
        ok = ok and match
    return {"max_abs_diff": worst, "max_rel_diff": max([0.0] + [o["max_rel_diff"] for o in per]),
            "outputs_match": ok, "outputs": per}


def _magnitude(array: np.ndarray) -> float:
    """The largest finite absolute value of a numeric array (0.0 for none)."""
    if array.dtype.kind not in "fciu" or not array.size:
        return 0.0
    values = np.abs(array.astype(np.float64))
    values = values[np.isfinite(values)]
    return float(values.max()) if values.size else 0.0
