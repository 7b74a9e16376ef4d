"""``clusterkit run MODEL --strategy S --selector SPEC [--plan FILE] [--check] [--json FILE]``

Partition (or apply a saved plan), fuse, compile every cluster on its device's backend and run
the model on random inputs; print per-subgraph timings. ``--check`` also runs onnxruntime on the
unpartitioned model with the same inputs and reports the largest absolute difference and the
mean run of that one session (``--repeat`` runs, same session options) against the fused run's;
with ``--optimize`` that is the original model, before onnxruntime's optimizations.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from clusterkit.api import run_strategy
from clusterkit.cli.common import (
    add_problem_args,
    check_output_args,
    dims_from_args,
    json_or_text,
    model_label,
    model_source,
    optimize_from_args,
    problem_from_args,
    strategy_options,
)
from clusterkit.cli.gates import add_gate_args, gate_status, metrics_failures
from clusterkit.errors import BackendError, ConstraintError
from clusterkit.fusion import fuse, source_model
from clusterkit.io.files import write_atomic
from clusterkit.io.loader import load_graph
from clusterkit.io.optimize import optimize_model
from clusterkit.result.model import Partition
from clusterkit.result.plan import (
    apply_plan,
    by_name_summary,
    load_plan,
    plan_label,
    plan_selectors,
)
from clusterkit.result.report import plural
from clusterkit.runtime.backends import parse_backend_spec
from clusterkit.runtime.backends.base import TOLERANCES
from clusterkit.runtime.executor import (
    DEFAULT_DIM,
    Executor,
    compare_outputs,
    random_inputs,
    run_model,
    time_model,
)

if TYPE_CHECKING:
    import onnx

    from clusterkit.constraints.core import Problem

log = logging.getLogger(__name__)


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("run", help="fuse the clusters and run the model heterogeneously")
    add_problem_args(p, selector_required=False)
    add_plan_arg(p)
    p.add_argument("--check", action="store_true",
                   help="also run onnxruntime on the unpartitioned model and compare outputs")
    p.add_argument("--json", metavar="FILE", help="write timings (and the check) as JSON here")
    p.add_argument("--backend", action="append", default=[], metavar="DEVICE=NAME",
                   help="backend of a device: onnxruntime (the default), reference, ep (each "
                   "cluster compiled by the plugin EP the device's selector models, e.g. qnn: "
                   "HTP, soc_model 60, fp16) or ep:EPNAME[key=value,...] (an installed plugin "
                   "EP with these provider options)")
    p.add_argument("--no-merge-steps", action="store_true",
                   help="run each cluster as its own step (default: consecutive clusters of one "
                   "device run as one step when the device accepts their union)")
    p.add_argument("--host-backend", default="onnxruntime", metavar="NAME",
                   help="backend of the fallback nodes (default: onnxruntime)")
    p.add_argument("--config", action="append", default=[], metavar="BACKEND.KEY=VALUE",
                   help="a backend config key, e.g. onnxruntime.intra_op_num_threads=1")
    p.add_argument("--repeat", type=int, default=1, help="timed runs (default 1)")
    p.add_argument("--input-seed", type=int, default=0,
                   help="seed of the random inputs (symbolic dims not fixed by --dim: 1 for "
                   f"batch, {DEFAULT_DIM} for the others)")
    add_weights_arg(p)
    p.add_argument("--rtol", type=float, default=None,
                   help="--check relative tolerance (default: the backends' precision: 1e-4 "
                   "for fp32, 2e-2 for an fp16 device such as the QNN HTP)")
    p.add_argument("--atol", type=float, default=None,
                   help="--check absolute tolerance (default: 1e-5 for fp32, 5e-2 for fp16)")
    p.add_argument("--perf-counts", action="store_true",
                   help="collect per-node timings and print the slowest nodes")
    p.add_argument("--no-fold-static", action="store_true",
                   help="compute values fixed by static shapes at every run, in the steps "
                   "(default: once, before running)")
    add_gate_args(p)
    return p


def add_weights_arg(p: argparse.ArgumentParser) -> None:
    """--random-weights [SEED]: real-valued weights for a model shipped with stubs."""
    p.add_argument("--random-weights", type=int, nargs="?", const=0, default=None,
                   metavar="SEED", help="replace the model's ConstantOfShape weight stubs by "
                   "seeded random weights (default seed 0) before partitioning: the bundled "
                   "models' stub weights overflow an fp16 accelerator")


def add_plan_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plan", metavar="FILE",
                   help="apply this saved partition JSON instead of partitioning (its selectors "
                   "are used when no --selector is given)")
    p.add_argument("--force", action="store_true",
                   help="apply a --plan made for a different model (another fingerprint) by "
                   "node name; nodes it does not place go to the fallback")


def partition_from_args(args: argparse.Namespace) -> Partition:
    """The partition the flags ask for: a saved plan, or the strategy's result."""
    plan, label = None, ""
    if getattr(args, "plan", None):
        label = plan_label(args.plan)
        plan = load_plan(args.plan, label)
        if not args.selector:  # an explicit --selector wins; a plan's own never loads a file
            args.selector = plan_selectors(plan, label)
        if getattr(args, "optimize", None) is None:  # the graph the plan's indices refer to
            args.optimize = plan.get("optimize")
    problem = problem_from_args(args)
    check_backend_devices(getattr(args, "backend", None) or [], problem)
    part = _partition(args, problem, plan, label)
    level = optimize_from_args(args)
    if level != "none":  # the graph the partition's indices refer to
        part.info["optimize"] = level
    return part


def _partition(args: argparse.Namespace, problem, plan: dict | None, label: str) -> Partition:
    """Apply ``plan`` (read from ``label``) to ``problem``, or run the strategy on it."""
    if plan is not None:
        made_from = None
        if getattr(args, "random_weights", None) is not None:  # the plan names the file's nodes
            made_from = load_graph(args.model, dims=dims_from_args(args),
                                   optimize=optimize_from_args(args))
        part = apply_plan(problem, plan, model_name=model_label(args.model), label=label,
                          force=args.force, made_from=made_from)
        part = part.derive(selector=" ".join(args.selector))
        if "plan_by_name" in part.info:
            print(by_name_summary(part.info["plan_by_name"]))
        return part
    return run_strategy(problem, args.strategy, selector=" ".join(args.selector),
                        coalesce_after=args.coalesce, **strategy_options(args))


def original_model(args: argparse.Namespace, fused) -> onnx.ModelProto:
    """The model as the user gave it, to check outputs against: the source of ``fused``, or
    with ``--optimize`` the file before onnxruntime's optimizations (every tensor loaded)."""
    if optimize_from_args(args) == "none":
        return source_model(fused)
    return optimize_model(model_source(args), "none")


def steps_line(executor: Executor, partitions: int) -> str:
    """``17 steps (9 subgraphs for the 9 partitions)``, saying how the subgraphs the executor
    runs came from the partitions when their counts differ: consecutive ones of one device
    merged into one step, ones the device's compiler refused carved into pieces or fallen back,
    ones no output needs (values fixed before the run) dropped."""
    subs = [u for u in executor.steps if u.kind == "subgraph" and not u.fallback_reason]
    verdicts = [c["verdict"] for c in executor.clusters]
    merged = sum(max(0, len(u.parts) - 1) for u in subs)
    how = []
    if merged:
        how.append(f"{merged} merged with the one before them")
    if verdicts.count("split"):
        how.append(f"{verdicts.count('split')} split into pieces the device compiles")
    if verdicts.count("fell back"):
        how.append(f"{verdicts.count('fell back')} fell back to the host")
    if partitions > len(verdicts):
        how.append(f"{partitions - len(verdicts)} not needed at run time")
    return (f"{plural(len(executor.steps), 'step')} ({plural(len(subs), 'subgraph')} for the "
            f"{plural(partitions, 'partition')}" + (f": {', '.join(how)})" if how else ")"))


def parse_config(items: list[str]) -> dict[str, dict[str, Any]]:
    """``BACKEND.KEY=VALUE`` flags → ``{backend: {key: value}}`` (values parsed as JSON when
    they can be)."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        head, sep, raw = item.partition("=")
        backend, dot, key = head.partition(".")
        if not sep or not dot or not backend or not key:
            raise BackendError(f"--config takes BACKEND.KEY=VALUE, got {item!r}")
        out.setdefault(backend.strip(), {})[key.strip()] = json_or_text(raw)
    return out


def check_backend_devices(items: list[str], problem: Problem) -> None:
    """Refuse ``--backend DEVICE=NAME`` for a device no selector defines."""
    for device in parse_pairs(items, "--backend"):
        if device not in problem.devices:
            where = ("the fallback's backend is --host-backend" if device == problem.fallback
                     else f"devices: {', '.join(problem.devices)}")
            raise ConstraintError(f"--backend {device}=...: no selector defines device "
                                  f"{device!r} ({where})")


def parse_pairs(items: list[str], flag: str) -> dict[str, str]:
    """``A=B`` flags → dict."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ConstraintError(f"{flag} takes NAME=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def main(args: argparse.Namespace) -> int:
    check_output_args(args, ("json",))
    part = partition_from_args(args)
    print(part.summary())
    fused = fuse(part)
    config = parse_config(args.config)
    backends = parse_pairs(args.backend, "--backend")
    if args.perf_counts:
        for spec in {args.host_backend, *backends.values()}:
            config.setdefault(parse_backend_spec(spec)[0], {})["perf_counts"] = True
    executor = Executor(fused, backends=backends, host=args.host_backend, backend_config=config,
                        fold_static=not args.no_fold_static,
                        merge_steps=not args.no_merge_steps)
    feeds = random_inputs(fused, seed=args.input_seed, dims=dims_from_args(args))
    outputs = None
    total = 0.0
    for _ in range(max(1, args.repeat)):
        start = time.perf_counter()
        outputs = executor.run(feeds)
        total += time.perf_counter() - start
    assert outputs is not None  # the loop runs at least once
    runs = max(1, args.repeat)
    print(executor.summary())
    print(f"{steps_line(executor, part.metrics()['partitions'])}, mean run "
          f"{total / runs * 1e3:.2f} ms over {plural(runs, 'run')}")
    print_clusters(executor)
    if args.perf_counts:
        print_slowest(executor)
    report: dict[str, Any] = {"model": model_label(args.model), "strategy": part.strategy,
                              "selector": part.selector, "max_abs_diff": None,
                              "outputs_match": None, "runs": runs,
                              "mean_run_seconds": total / runs,
                              "subgraphs": executor.timings(), "fallbacks": executor.fallbacks,
                              "clusters": executor.clusters}
    code = 0
    if args.check:
        code = check_outputs(args, fused, executor, feeds, outputs, config, report)
    if args.json:
        write_atomic(args.json, json.dumps(report, indent=1) + "\n")
        log.info("wrote %s", args.json)
    return gate_status(metrics_failures(args, part.metrics()), code)


def print_clusters(executor: Executor) -> None:
    """What the devices' compilers made of the clusters: one line of counts, then one line per
    cluster that was split or fell back, with the compiler's reason."""
    verdicts = [c["verdict"] for c in executor.clusters]
    split = [c for c in executor.clusters if c["verdict"] != "compiled"]
    if not split:
        if verdicts and any(b.name == "ep" for b in executor.backends.values()):
            print(f"clusters: {plural(len(verdicts), 'cluster')} compiled whole")
        return
    print(f"clusters: {verdicts.count('compiled')} compiled, {verdicts.count('split')} split, "
          f"{verdicts.count('fell back')} fell back")
    for c in split:
        how = (f"split into {plural(c['pieces'], 'piece')}, {plural(c['fallen'], 'node')} "
               "fell back" if c["verdict"] == "split" else "fell back whole")
        print(f"  {c['cluster']} ({c['device']}, {plural(c['nodes'], 'node')}): {how}: "
              f"{c['reason']}")


def print_slowest(executor: Executor, count: int = 15) -> None:
    """The slowest nodes of the steps whose backends collected per-node counters."""
    nodes = sorted(executor.node_timings(), key=lambda r: -r["seconds"])[:count]
    print("slowest nodes:")
    for rec in nodes:
        print(f"  {rec['seconds'] * 1e3:9.3f} ms  {rec['op_type']:18s} {rec['node']} "
              f"[{rec['step']}]")


def check_outputs(args: argparse.Namespace, fused, executor: Executor, feeds, outputs,
                  config: dict, report: dict[str, Any]) -> int:
    """``--check``: the outputs against onnxruntime's CPU provider on the unpartitioned model,
    within the backends' tolerance (or ``--rtol``/``--atol``), each output's largest absolute
    and relative error printed; and the run's time against one session's. Returns the exit
    status (1 when they do not match)."""
    rtol, atol = executor.tolerance()
    rtol = args.rtol if args.rtol is not None else rtol
    atol = args.atol if args.atol is not None else atol
    start = time.perf_counter()
    reference = original_model(args, fused)
    expected = run_model(reference, feeds, config.get("onnxruntime"))
    report["reference_seconds"] = time.perf_counter() - start
    cmp = compare_outputs(expected, outputs, rtol=rtol, atol=atol)
    report.update(max_abs_diff=cmp["max_abs_diff"], max_rel_diff=cmp["max_rel_diff"],
                  outputs_match=cmp["outputs_match"], outputs=cmp["outputs"], rtol=rtol,
                  atol=atol)
    verdict = "match" if cmp["outputs_match"] else "DO NOT match"
    print(f"outputs {verdict} onnxruntime on the unpartitioned model: max |diff| = "
          f"{cmp['max_abs_diff']:.3g} (rtol {rtol:g}, atol {atol:g})")
    if len(cmp["outputs"]) > 1 or executor.tolerance() != TOLERANCES["fp32"]:
        for o in cmp["outputs"]:
            print(f"  {o['name']}: max |diff| {o['max_abs_diff']:.3g}, relative to its largest "
                  f"value {o['max_rel_diff']:.3g}{'' if o['match'] else '  (DOES NOT match)'}")
    runs = report["runs"]
    single = time_model(reference, feeds, config.get("onnxruntime"), runs)
    fused_mean = report["mean_run_seconds"]
    report["single_session_mean_seconds"] = single
    report["ratio_to_single_session"] = fused_mean / single
    print(f"one onnxruntime session of that model: mean run {single * 1e3:.2f} ms; fused / "
          f"one session = {fused_mean / single:.3f} (same session options)")
    return 0 if cmp["outputs_match"] else 1
