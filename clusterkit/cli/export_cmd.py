"""``clusterkit export MODEL --strategy S --selector SPEC -o OUT.onnx [--plan FILE]``

Partition (or apply a saved plan), fuse, and write an ONNX model in which every cluster is a
local function in the domain ``clusterkit.<device>``.
"""

from __future__ import annotations

import argparse

from clusterkit.cli.common import add_problem_args, model_label
from clusterkit.cli.run_cmd import add_plan_arg, original_model, partition_from_args
from clusterkit.export.onnx_model import export_fused, model_bytes, save_model, wants_external_data
from clusterkit.fusion import fuse
from clusterkit.io.files import write_all
from clusterkit.result.json_format import partition_json_text
from clusterkit.runtime.executor import compare_outputs, random_inputs, run_model


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("export", help="write the fused model as ONNX (clusters as functions)")
    add_problem_args(p, selector_required=False)
    add_plan_arg(p)
    p.add_argument("-o", "--output", required=True, metavar="OUT.onnx", help="the model to write")
    p.add_argument("--json", metavar="FILE", help="also write the partition JSON (a plan) here")
    p.add_argument("--no-check", action="store_true", help="skip the onnx checker")
    p.add_argument("--verify", action="store_true",
                   help="run the exported and the original model in onnxruntime on the same "
                   "random inputs and compare")
    return p


def main(args: argparse.Namespace) -> int:
    part = partition_from_args(args)
    print(part.summary())
    fused = fuse(part)
    name = model_label(args.model)
    model = export_fused(fused, model_name=name, check=not args.no_check)
    outputs: list[tuple[str, str | bytes]] = (
        [(args.json, partition_json_text(part, name))] if args.json else [])
    external = wants_external_data(fused)
    data = model_bytes(model, args.output, external)
    if data is None:  # external data (as the source, or too large): written first, then the rest
        save_model(model, args.output, external)
    else:
        outputs.insert(0, (args.output, data))
    write_all(outputs)
    domains = [op.domain for op in model.opset_import if op.domain.startswith("clusterkit.")]
    print(f"wrote {args.output}: {len(model.graph.node)} nodes, {len(model.functions)} local "
          f"functions in {', '.join(domains) or 'no device domain'}"
          f"{'' if args.no_check else ' (onnx checker passed)'}")
    if args.json:
        print(f"wrote {args.json}")
    if args.verify:
        feeds = random_inputs(fused)
        cmp = compare_outputs(run_model(original_model(args, fused), feeds),
                              run_model(model, feeds))
        verdict = "match" if cmp["outputs_match"] else "DO NOT match"
        print(f"exported model outputs {verdict} the original: max |diff| = "
              f"{cmp['max_abs_diff']:.3g}")
        return 0 if cmp["outputs_match"] else 1
    return 0
