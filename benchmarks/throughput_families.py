"""Families of throughput-placement instances the chain heuristic was never tuned on, as
:class:`~clusterkit.io.placement_instance.PlacementInstance` objects; every generator is
deterministic in its seed.

- :func:`layered_dag`: random layered DAGs with skewed costs - heavy-tailed (Pareto) latencies,
  nodes the accelerators do not take, CPU-heavy or accelerator-heavy mixes, edge costs from
  negligible to dominant, memories from loose to tight;
- :func:`model_instance`: an ONNX model's graph under a device description (:data:`DEVICES`
  lists the descriptions the bench uses), by clusterkit's own converter of a platform;
- :func:`vision_chain`: a ResNet-34-like chain (34 convolutions, residual adds, downsampling
  shortcuts) with latencies from tensor bytes, fast accelerators and weights that grow toward
  the end: the shape on which the CPU was left the bottleneck (issue 33).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from clusterkit.constraints.platform import Platform
from clusterkit.graph.core import Graph
from clusterkit.io.placement_instance import PlacementInstance, instance_from_dict


def _doc(nodes: list[dict], edges: list[dict], k: int, cpus: int, memory: float) -> dict:
    return {"maxFPGAs": k, "maxCPUs": cpus, "maxSizePerFPGA": memory, "nodes": nodes,
            "edges": edges}


def _node(i: int, cpu: float, acc: float, size: float, supported: bool) -> dict:
    return {"id": i, "supportedOnFpga": int(supported), "cpuLatency": cpu, "fpgaLatency": acc,
            "size": size, "isBackwardNode": 0}


# ---------------------------------------------------------------- (a) random layered DAGs
def layered_dag(seed: int, n: int, accelerators: int | None = None, cpus: int | None = None
                ) -> PlacementInstance:
    """A random layered DAG of ``n`` nodes: layers of 1 to ``width`` nodes, each node fed by
    1-3 nodes of the previous 1-3 layers; Pareto latencies; the seed picks the mix (CPU-heavy:
    the CPU 2-30x slower; accelerator-heavy: some nodes faster on the CPU), the share of
    unsupported nodes (0-8%), the edge-cost scale (0.01-2x a mean latency), 2-6 accelerators,
    1-2 CPUs (unless ``accelerators`` and ``cpus`` are given) and the memory (all the weights,
    or 1.1-2x the weights over ``k``)."""
    rng = random.Random(seed)
    width = rng.choice((1, 2, 4, 8, 16))
    layers = _layers(rng, n, width)
    mix = rng.choice(("cpu-heavy", "acc-heavy", "balanced"))
    unsupported = rng.choice((0.0, 0.01, 0.03, 0.08))
    comm = rng.choice((0.01, 0.1, 0.5, 2.0))
    k, c = rng.randrange(2, 7), rng.randrange(1, 3)
    k, c = accelerators or k, cpus or c
    nodes = []
    for v in range(n):
        acc = rng.paretovariate(1.5)
        ratio = {"cpu-heavy": rng.uniform(2, 30), "acc-heavy": rng.choice((0.3, 1.0, 8.0)),
                 "balanced": rng.lognormvariate(1.0, 1.0)}[mix]
        nodes.append(_node(v, acc * ratio, acc, float(int(1000 * rng.paretovariate(1.2))),
                           rng.random() >= unsupported))
    edges = [{"sourceId": u, "destId": v, "cost": c}
             for u, v, c in _layer_edges(rng, layers, comm)]
    weights = sum(nd["size"] for nd in nodes)
    memory = float(int(rng.choice((weights + 1.0, weights / k * rng.uniform(1.1, 2.0)))))
    return instance_from_dict(_doc(nodes, edges, k, c, memory),
                              f"layered-{n}-s{seed}-{mix}")


def _layers(rng: random.Random, n: int, width: int) -> list[list[int]]:
    layers, v = [], 0
    while v < n:
        w = min(n - v, rng.randint(1, width))
        layers.append(list(range(v, v + w)))
        v += w
    return layers


def _layer_edges(rng: random.Random, layers: list[list[int]], comm: float
                 ) -> list[tuple[int, int, float]]:
    """Each node of layer ``i > 0`` fed by 1-3 nodes of layers ``i-3 .. i-1`` (one at least
    from ``i-1`` so layers stay layers); one transfer cost per source node."""
    cost: dict[int, float] = {}
    out = []
    for i in range(1, len(layers)):
        pool = [u for layer in layers[max(0, i - 3):i] for u in layer]
        for v in layers[i]:
            preds = {rng.choice(layers[i - 1])}
            preds |= set(rng.sample(pool, min(len(pool), rng.randrange(0, 3))))
            for u in sorted(preds):
                c = cost.setdefault(u, comm * rng.paretovariate(2.0))
                out.append((u, v, c))
    return out


# ---------------------------------------------------------------- (b) ONNX models
@dataclass(frozen=True)
class Devices:
    """A device description for :func:`model_instance`: ``flops`` and ``bandwidth`` are the
    (accelerator, CPU) peak FLOP/s and memory bytes/s; ``memory`` each accelerator's bytes for
    weights as a multiple of the model's weights over ``accelerators`` (None: unlimited)."""

    name: str
    accelerators: int
    cpus: int
    flops: tuple[float, float]
    bandwidth: tuple[float, float]
    link_bw: float
    link_latency: float
    memory: float | None
    selector: str

    def platform(self, graph: Graph) -> Platform:
        """The platform file's object of this description for ``graph`` (whose weights set
        the memory)."""
        acc: dict[str, Any] = {
            "count": self.accelerators, "selector": self.selector, "flops": self.flops[0],
            "memory_bandwidth": self.bandwidth[0], "overhead": 5e-6,
            "link": {"bandwidth": self.link_bw, "latency": self.link_latency}}
        if self.memory is not None:
            weights = float(graph.const_bytes[~graph.folded].sum())
            acc["weights_memory"] = max(self.memory * weights / self.accelerators, 1.0)
        cpu = {"count": self.cpus, "flops": self.flops[1], "memory_bandwidth": self.bandwidth[1],
               "overhead": 1e-6}
        return Platform.from_dict({"accelerators": [acc], "cpu": cpu})


#: the descriptions every model is placed under
DEVICES = (
    Devices("fast-link-large-mem", 4, 1, (4e12, 1e11), (2e11, 2e10), 3.2e10, 2e-6, None,
            "xnnpack"),
    Devices("slow-link-small-mem", 2, 2, (1e12, 5e10), (1e11, 1.5e10), 2e9, 2e-5, 1.3,
            "nnapi"),
    Devices("six-npus-tight", 6, 1, (8e12, 2e11), (4e11, 4e10), 8e9, 1e-5, 1.1, "qnn"),
)


def model_instance(graph: Graph, d: Devices) -> PlacementInstance:
    """The instance of ``graph`` under ``d``: clusterkit's own converter
    (:func:`clusterkit.model_instance`) on the platform ``d`` describes."""
    import clusterkit as ck

    return ck.model_instance(graph, d.platform(graph))


# ---------------------------------------------------------------- (c) the CPU as bottleneck
def vision_chain(seed: int) -> PlacementInstance:
    """A ResNet-34-like chain: a stem, 16 basic blocks of two 3x3 convolutions and an add
    (a 1x1 shortcut where the stage changes), pooling and a classifier, with what a real
    export adds around it: a side output per stage (a feature tap, ``Shape``-like, that only
    the CPU runs) and a host-only input (a scale) that only the classifier reads. Each node's
    latency is its input and output bytes over the device's bandwidth (accelerators 8-40x the
    CPU), its size its weights, its transfer cost its output over the link. A file order puts
    each tap right after its stage and the scale first, so a cut of it leaves the whole model
    between them to the CPU; the contiguous optimum keeps the CPU to the taps. The seed varies
    the speeds, the link, 3-4 accelerators, the other ops the accelerators refuse and the
    memory (0.9-1.6x the weights over the accelerators)."""
    rng = random.Random(seed)
    fast = rng.uniform(8, 40)
    link = rng.choice((0.5, 1.0, 3.0))
    refuse = ("tap", "scale") + rng.choice(((), ("pool",), ("fc",)))
    layers = _resnet34(rng)
    nodes = [_node(i, b, b / fast, float(int(w * 1e6)), op not in refuse)
             for i, (op, b, w, _) in enumerate(layers)]
    edges = [{"sourceId": u, "destId": i, "cost": layers[u][1] * 0.3 / link}
             for i, (_, _, _, preds) in enumerate(layers) for u in preds]
    k = rng.choice((3, 3, 4))
    memory = float(int(sum(w for _, _, w, _ in layers) * 1e6 / k * rng.uniform(0.9, 1.6)))
    return instance_from_dict(_doc(nodes, edges, k, 1, memory), f"vision34-s{seed}")


def _resnet34(rng: random.Random) -> list[tuple[str, float, float, list[int]]]:
    """(op, activation MB, weight MB, predecessors) per node, in topological order."""
    out: list[tuple[str, float, float, list[int]]] = [("scale", 0.001, 0.0, [])]
    out.append(("conv", 6.4, 0.04, []))
    out.append(("pool", 1.6, 0.0, [1]))
    last, side = 2, 56
    for stage, (blocks, ch) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
        for b in range(blocks):
            down = stage > 0 and b == 0
            if down:
                side //= 2
            act = 4 * ch * side * side / 1e6 * rng.uniform(0.8, 1.25)
            wt = 4 * 9 * ch * ch / 1e6
            out.append(("conv", act, wt / (2 if down else 1), [last]))
            out.append(("conv", act, wt, [len(out) - 1]))
            skip = last
            if down:
                out.append(("conv", act, 4 * ch * ch / 2e6, [last]))
                skip = len(out) - 1
            out.append(("add", act, 0.0, [len(out) - 1 if not down else len(out) - 2, skip]))
            last = len(out) - 1
        out.append(("tap", act * 0.05, 0.0, [last]))
    out.append(("pool", 0.002, 0.0, [last]))
    out.append(("fc", 0.004, 2.0, [len(out) - 1, 0]))
    return out


def families(quick: bool = False) -> dict[str, list[Any]]:
    """The bench's instances per family: layered DAGs of 50 to 2,000 nodes, the vision
    chains; the model family is built by the bench (it reads the models)."""
    sizes = (50, 120, 300) if quick else (50, 80, 120, 200, 300, 500, 1000, 2000)
    layered = [layered_dag(100 + i, n) for i, n in enumerate(sizes)]
    vision = [vision_chain(s) for s in range(4 if quick else 8)]
    return {"layered": layered, "vision": vision}


def describe(inst: PlacementInstance) -> dict[str, Any]:
    """A short record of an instance: name, nodes, accelerators, CPUs."""
    return {"name": inst.name, "nodes": inst.n, "k": inst.accelerators, "cpus": inst.cpus}
