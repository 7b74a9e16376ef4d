"""``clusterkit profile MODEL -o times.json [--runs N]``: every node's measured seconds on
onnxruntime's CPU provider (:mod:`clusterkit.runtime.profile`), the file a platform's
``latencies`` field reads."""

from __future__ import annotations

import argparse

from clusterkit.cli.common import check_output_args
from clusterkit.runtime.profile import profile_model, write_profile


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("profile", help="measure every node's seconds on onnxruntime's CPU "
                       "provider (median over runs) for a platform's latencies")
    p.add_argument("model", metavar="MODEL", help="an .onnx file")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="write {\"nodes\": {name: seconds}} here")
    p.add_argument("--runs", type=int, default=5, metavar="N",
                   help="profiled runs after one warm-up (default 5); each node's median")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    return p


def main(args: argparse.Namespace) -> int:
    check_output_args(args, ("output",))
    times = profile_model(args.model, runs=args.runs, seed=args.seed)
    write_profile(args.output, args.model, times, args.runs)
    total = sum(times.values())
    print(f"{args.model}: {len(times)} nodes, {total * 1e3:.3f} ms per run (sum of medians "
          f"over {args.runs} runs); wrote {args.output}")
    return 0
