"""``clusterkit verify MODEL --selector S [--json FILE] [--strategy NAME] [--no-compile]``: a
shipped selector against the installed real execution provider it models.

Exit status: 0 when they agree (the same offloaded nodes in the same partitions), 1 when they
differ, 2 on an error (the EP not installed, an unreadable model, ...)."""

from __future__ import annotations

import argparse
import json
import logging

from clusterkit.analysis.verify import Verification, verify
from clusterkit.cli.common import add_dim_arg, check_output_args, dims_from_args
from clusterkit.errors import ConstraintError
from clusterkit.io.files import write_all
from clusterkit.result.report import plural

log = logging.getLogger(__name__)

#: at most this many differing nodes are printed per side (the JSON has them all)
SHOWN = 20


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("verify", help="compare a shipped selector with the real execution "
                       "provider it models (exit 0 agree, 1 differ, 2 error)")
    p.add_argument("model", metavar="MODEL", help="an .onnx file")
    p.add_argument("--selector", required=True, metavar="SPEC",
                   help="a shipped selector that models an installable plugin EP (qnn, "
                   "openvino_npu), with settings as for partition")
    p.add_argument("--strategy", default="auto", metavar="NAME",
                   help="clusterkit's clustering strategy (default: auto)")
    p.add_argument("--json", metavar="FILE", help="write the comparison as JSON here")
    p.add_argument("--no-compile", action="store_true",
                   help="stop the EP's session after partitioning (quicker; a failure of the "
                   "EP's compilation is then not seen)")
    add_dim_arg(p)
    return p


def main(args: argparse.Namespace) -> int:
    check_output_args(args, ("json",))
    if not args.selector.strip():
        raise ConstraintError("--selector takes a shipped selector, e.g. --selector qnn")
    report = verify(args.model, args.selector, strategy=args.strategy,
                    compile=not args.no_compile, dims=dims_from_args(args) or None)
    if args.json:
        write_all([(args.json, json.dumps(report.to_json(), indent=1) + "\n")])
    print_report(report)
    if args.json:
        log.info("wrote %s", args.json)
    return 0 if report.agree else 1


def print_report(r: Verification) -> None:
    """The comparison as a few lines and the differing nodes."""
    data = r.to_json()
    print(f"{r.model}: selector {r.selector} against {r.ep} {r.ep_version} (graph after "
          f"onnxruntime's basic optimizations, {r.nodes} nodes)")
    print(f"  {r.ep}: {plural(len(r.ep_partitions), 'partition')}, "
          f"{plural(data['ep_offloaded'], 'node')}")
    print(f"  clusterkit: {plural(len(r.partitions), 'partition')}, "
          f"{plural(data['offloaded'], 'node')} "
          f"({plural(len(r.ort_grouped), 'partition')} as onnxruntime groups them)")
    for title, diffs in ((f"taken by {r.ep} only", r.only_ep),
                         ("taken by clusterkit only", r.only_selector)):
        if diffs:
            print(f"  {title}: {len(diffs)}")
        for d in diffs[:SHOWN]:
            print(f"    node {d.name!r} ({d.op}, #{d.index}): {d.reason}")
        if len(diffs) > SHOWN:
            print(f"    ... {len(diffs) - SHOWN} more in the JSON")
    for note in r.notes:
        print(f"  note: {note}")
    if r.known_fault and not r.agree:
        print(f"  known: the selector's data lists this model as the EP's fault: {r.known_fault}")
    if r.known_grouping and not r.same_partitions:
        print(f"  known: the selector's data lists a different grouping: {r.known_grouping}")
    print("agree" if r.agree else "differ")
