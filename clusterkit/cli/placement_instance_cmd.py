"""``clusterkit placement-instance MODEL --platform FILE -o X.json``: the model on the platform
as a placement instance in the paper's format (``docs/placement-instance.md``), for its
evaluator or for ``clusterkit partition X.json``."""

from __future__ import annotations

import argparse

from clusterkit.cli.common import (
    add_dim_arg,
    add_optimize_arg,
    add_platform_arg,
    check_output_args,
    instance_from_args,
)
from clusterkit.io.placement_instance import write_instance


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("placement-instance", help="write a model on a platform as a placement "
                       "instance (the NeurIPS 2020 paper's format)")
    p.add_argument("model", metavar="MODEL", help="an .onnx file or a node-link .json graph")
    add_platform_arg(p, required=True)
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="write the instance JSON here")
    add_dim_arg(p)
    add_optimize_arg(p)
    p.set_defaults(selector=[])
    return p


def main(args: argparse.Namespace) -> int:
    check_output_args(args, ("output",))
    inst = instance_from_args(args)
    write_instance(args.output, inst)
    print(f"{inst.name}: {inst.n} nodes ({int(inst.supported.sum())} on the accelerator's "
          f"selector), {len(inst.edge_src)} edges, {inst.accelerators} accelerators, "
          f"{inst.cpus} CPUs; wrote {args.output}")
    return 0
