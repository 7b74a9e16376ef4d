"""``clusterkit export MODEL --strategy S --selector SPEC -o OUT.onnx [--plan FILE]``

Partition (or apply a saved plan), fuse, and write an ONNX model in which every cluster is a
local function in the domain ``clusterkit.<device>``. With ``--compile``, every offloaded cluster
is compiled by its device's plugin EP instead and the model holds its compiled form (EPContext
nodes, context binaries beside the model or, with ``--embed-context``, inside): a model to
deploy with onnxruntime and the EP alone, which ``--verify`` then runs exactly so.
"""

from __future__ import annotations

import argparse
import logging
import os

from clusterkit.cli import common
from clusterkit.cli.run_cmd import (
    add_plan_arg,
    add_weights_arg,
    original_model,
    parse_pairs,
    partition_from_args,
)
from clusterkit.errors import UsageError
from clusterkit.export.onnx_model import export_fused, model_bytes, save_model, wants_external_data
from clusterkit.fusion import fuse, source_model
from clusterkit.io.files import write_all
from clusterkit.result.json_format import partition_json_text
from clusterkit.result.report import plural
from clusterkit.runtime.executor import compare_outputs, random_inputs, run_model

log = logging.getLogger(__name__)


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("export", help="write the fused model as ONNX (clusters as functions)")
    common.add_problem_args(p, selector_required=False)
    add_plan_arg(p)
    p.add_argument("-o", "--output", required=True, metavar="OUT.onnx", help="the model to write")
    p.add_argument("--format", choices=("onnx", "openvino"), default="onnx",
                   help="onnx (default), or openvino: OpenVINO IR (OUT.xml + OUT.bin, full "
                   "precision) and OUT.affinity.json, every op's device for OpenVINO HETERO "
                   "(--verify then compiles it with the real HETERO plugin)")
    p.add_argument("--json", metavar="FILE", help="also write the partition JSON (a plan) here")
    p.add_argument("--no-check", action="store_true", help="skip the onnx checker")
    p.add_argument("--verify", action="store_true",
                   help="run the exported and the original model in onnxruntime on the same "
                   "random inputs and compare (with --compile: the exported model in a fresh "
                   "Python with only onnxruntime and the plugin EP, at the device's precision)")
    p.add_argument("--compile", action="store_true",
                   help="compile every offloaded cluster with its device's plugin EP and write "
                   "its compiled form (EPContext nodes); the host nodes stay plain ONNX")
    p.add_argument("--embed-context", action="store_true",
                   help="with --compile: the EP's context binaries inside the model (default: "
                   "files OUT_ctxK.bin beside it)")
    p.add_argument("--backend", action="append", default=[], metavar="DEVICE=SPEC",
                   help="with --compile: the EP of a device, ep (default: the one its selector "
                   "models) or ep:EPNAME[key=value,...]")
    add_weights_arg(p)
    return p


def main(args: argparse.Namespace) -> int:
    common.check_output_args(args, ("output", "json"))
    if (args.embed_context or args.backend) and not args.compile:
        raise UsageError("--embed-context and --backend go with --compile", "clusterkit export")
    if args.format == "openvino" and (args.compile or args.no_check):
        raise UsageError("--format openvino goes without --compile and --no-check",
                         "clusterkit export")
    part = partition_from_args(args)
    print(part.summary())
    fused = fuse(part)
    if args.format == "openvino":
        return export_ir(args, part, fused)
    if args.compile:
        return export_compiled(args, part, fused)
    name = common.model_label(args.model)
    model = export_fused(fused, model_name=name, check=not args.no_check)
    outputs: list[tuple[str, str | bytes]] = (
        [(args.json, partition_json_text(part, name))] if args.json else [])
    cmp = None
    if args.verify:  # before anything is written: a model onnxruntime cannot run is an error
        feeds = random_inputs(fused)
        cmp = compare_outputs(run_model(original_model(args, fused), feeds),
                              run_model(model, feeds))
    external = wants_external_data(fused)
    data = model_bytes(model, args.output, external)
    if data is None:  # external data (as the source, or too large): written first, then the rest
        save_model(model, args.output, external)
    else:
        outputs.insert(0, (args.output, data))
    write_all(outputs)
    domains = [op.domain for op in model.opset_import if op.domain.startswith("clusterkit.")]
    log.info("wrote %s: %d nodes, %d local functions in %s%s", args.output,
             len(model.graph.node), len(model.functions), ", ".join(domains) or
             "no device domain", "" if args.no_check else " (onnx checker passed)")
    if args.json:
        log.info("wrote %s", args.json)
    if cmp is not None:
        verdict = "match" if cmp["outputs_match"] else "DO NOT match"
        print(f"exported model outputs {verdict} the original: max |diff| = "
              f"{cmp['max_abs_diff']:.3g}")
        return 0 if cmp["outputs_match"] else 1
    return 0


def export_compiled(args: argparse.Namespace, part, fused) -> int:
    """``--compile``: every offloaded cluster compiled by its device's EP (pieces where the EP
    refuses a cluster whole), the compiled model and its binaries written as one step."""
    import tempfile

    from clusterkit.cli.run_cmd import print_clusters
    from clusterkit.export.compiled import compiled_model, write_compiled
    from clusterkit.runtime.executor import Executor

    chosen = parse_pairs(args.backend, "--backend")
    with tempfile.TemporaryDirectory(prefix="clusterkit_ctx_") as folder:
        config = {"ep": {"context_dir": folder, "embed_context": args.embed_context}}
        executor = Executor(fused, backends={d: chosen.get(d, "ep") for d in part.problem.devices},
                            backend_config=config, merge_steps=False)
        stem = os.path.splitext(os.path.basename(args.output))[0]
        model, binaries = compiled_model(executor, stem, common.model_label(args.model))
    written = write_compiled(model, binaries, args.output)
    ctx = [nd for nd in model.graph.node if nd.op_type == "EPContext"]
    print_clusters(executor)
    where = "inside" if args.embed_context else f"in {plural(len(written), 'file')} beside it"
    log.info("wrote %s: %s (context %s), %s", args.output, plural(len(ctx), "EPContext node"),
             where, plural(len(model.graph.node) - len(ctx), "host node"))
    if args.json:
        write_all([(args.json, partition_json_text(part, common.model_label(args.model)))])
        log.info("wrote %s", args.json)
    if not args.verify:
        return 0
    return verify_compiled(args, fused, executor)


def verify_compiled(args: argparse.Namespace, fused, executor) -> int:
    """Run the written model with onnxruntime and the plugin EP alone and compare it with the
    original on onnxruntime's CPU provider, at the devices' precision."""
    from clusterkit.export.compiled import run_deployed

    backends = [b for b in executor.backends.values() if b.name == "ep"]
    if len({b.ep for b in backends}) != 1:
        raise UsageError("--verify of a compiled export runs one plugin EP; the devices use "
                         f"{len({b.ep for b in backends})}", "clusterkit export")
    feeds = random_inputs(fused, dims=common.dims_from_args(args))
    actual, facts = run_deployed(args.output, backends[0].ep, backends[0].provider_options, feeds)
    rtol, atol = executor.tolerance()
    cmp = compare_outputs(run_model(original_model(args, fused), feeds), actual, rtol=rtol,
                          atol=atol)
    verdict = "match" if cmp["outputs_match"] else "DO NOT match"
    print(f"loaded with onnxruntime and {backends[0].ep} alone ({facts['on_ep']} nodes on the "
          f"EP): outputs {verdict} the original: max |diff| = {cmp['max_abs_diff']:.3g} (rtol "
          f"{rtol:g}, atol {atol:g})")
    return 0 if cmp["outputs_match"] else 1


def export_ir(args: argparse.Namespace, part, fused) -> int:
    """``--format openvino``: the IR and its affinity map; with ``--verify``, HETERO compiles
    it and its submodels and outputs are checked against the clusters and the original."""
    from clusterkit.export.openvino_ir import affinity_path, export_openvino, hetero_devices

    aff = export_openvino(part, args.output, model=source_model(fused))
    counts = {d: sum(1 for v in aff.device.values() if v == d) for d in dict.fromkeys(
        [*part.problem.devices, part.fallback])}
    log.info("wrote %s (and its .bin): %s", args.output, plural(len(aff.device), "op"))
    print(f"wrote {affinity_path(args.output)}: "
          + ", ".join(f"{d} {n} ops" for d, n in counts.items())
          + f" ({len(aff.unmapped)} mapped to nothing: given {part.fallback})")
    print(f"compile with {hetero_devices(aff.device, part.fallback)}")
    if args.json:
        write_all([(args.json, partition_json_text(part, common.model_label(args.model)))])
        log.info("wrote %s", args.json)
    return verify_ir(args, part, fused) if args.verify else 0


def verify_ir(args: argparse.Namespace, part, fused) -> int:
    """Compile the IR with the real HETERO plugin; print its submodels against the clusters
    and its outputs against onnxruntime on the original."""
    from clusterkit.runtime.hetero_check import check_hetero

    feeds = random_inputs(fused, dims=common.dims_from_args(args))
    expected = run_model(original_model(args, fused), feeds)
    r = check_hetero(part, args.output, feeds, expected)
    stand = "".join(f" ({d}: the CPU plugin registered as {n})"
                    for d, n in r["stand_ins"].items())
    print(f"{r['device']}{stand}: HETERO_NUMBER_OF_SUBMODELS {r['submodels']}, compiled in "
          f"{r['compile_seconds']:.3f}s")
    for dev, v in r["per_device"].items():
        print(f"  {dev}: {plural(v['submodels'], 'submodel')}, clusterkit "
              f"{plural(v['clusters'], 'cluster' if dev != part.fallback else 'host group')}")
    for row in r["clusters"]:
        if row["verdict"] not in ("equal", "absent"):
            print(f"  cluster {row['cluster']} ({row['device']}, "
                  f"{plural(row['nodes'], 'node')}): {row['verdict']}: {row['why']}")
    same = "are" if r["same_split"] else "are NOT"
    verdict = "match" if r["outputs_match"] else "DO NOT match"
    print(f"HETERO's submodels {same} clusterkit's clusters; outputs {verdict} the original: "
          f"max |diff| = {r['max_abs_diff']:.3g} (rtol {r['rtol']:g}, atol {r['atol']:g})")
    if not r["outputs_match"]:
        kept = "match" if r["split_keeps_outputs"] else "DO NOT match"
        print(f"  HETERO's outputs {kept} the same IR compiled unsplit on {r['unsplit_device']}: "
              f"max |diff| = {r['unsplit_max_abs_diff']:.3g}"
              + (" (OpenVINO's kernels differ from onnxruntime's, not the split)"
                 if r["split_keeps_outputs"] else ""))
    return 0 if r["same_split"] and (r["outputs_match"] or r["split_keeps_outputs"]) else 1
