"""Arguments shared by the subcommands: model, selectors, constraints, strategy options."""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
import time
from typing import Any, Iterable

from clusterkit.constraints.core import DEFAULT_VALUE_INPUTS, Constraints, Problem
from clusterkit.engines import OptionFlag, get_strategy, registered_specs
from clusterkit.engines.throughput import instance_problem
from clusterkit.errors import ConstraintError, ModelLoadError, StrategyError, UsageError
from clusterkit.io.files import check_outputs
from clusterkit.io.loader import load_graph
from clusterkit.io.placement_instance import PlacementInstance, instance_graph, is_instance_file
from clusterkit.modes import OPTIMIZE_LEVELS, OptimizeLevel, check_choice
from clusterkit.selection.protocol import SubgraphProperty
from clusterkit.selection.registry import SHIPPED_TRAITS
from clusterkit.selection.specs import check_op_types, parse_selectors

log = logging.getLogger(__name__)

#: shipped selectors that model an onnxruntime execution provider (which sees the optimized graph)
ORT_EP_SELECTORS = frozenset(name for name, traits in SHIPPED_TRAITS.items() if traits.ep)


def add_problem_args(p: argparse.ArgumentParser, strategy_default: str | None = "auto",
                     selector_required: bool = True,
                     unless: str = "--plan names them") -> None:
    """MODEL, --selector (shown as required in the usage unless ``selector_required`` is False,
    for the commands where something else names the devices: ``unless`` says what), --fallback
    and the constraint flags."""
    p.add_argument("model", metavar="MODEL", help="an .onnx file or a node-link .json graph")
    p.add_argument("--selector", action="append", default=[], metavar="SPEC",
                   required=selector_required,
                   help="a shipped selector's name, a Python file defining a SubgraphProperty, or"
                   " [DEVICE=]ops:OP,OP,... ; repeat for devices in priority order. Settings: "
                   "NAME[key=value,...], exclude=OP|OP, include=OP|OP (see 'clusterkit "
                   "selectors')" + ("" if selector_required else f"; required unless {unless}"))
    p.add_argument("--fallback", default="cpu", help="the fallback device (default: cpu)")
    if strategy_default is not None:
        p.add_argument("--strategy", default=strategy_default, metavar="NAME",
                       help=strategy_help(strategy_default))
    add_dim_arg(p)
    add_optimize_arg(p)
    add_constraint_args(p)


def add_explain_limit_arg(p: argparse.ArgumentParser, default: int) -> None:
    """--explain-limit N: how many split node pairs to list (``partition --explain``,
    ``report``)."""
    p.add_argument("--explain-limit", type=int, default=default, metavar="N",
                   help=f"list at most N split node pairs and their reasons (default: {default})")


def add_devices_arg(p: argparse.ArgumentParser) -> None:
    """--devices MODE: how a node that several devices take gets its device."""
    p.add_argument("--devices", choices=("priority", "cost"), default=None,
                   help="a node several devices take: the first by priority (default), or the "
                        "one that lowers the cut")


def add_optimize_arg(p: argparse.ArgumentParser) -> None:
    """--optimize LEVEL: partition the graph onnxruntime's optimizations of LEVEL produce."""
    p.add_argument("--optimize", default=None, metavar="LEVEL",
                   help="'none' (default): partition the model's graph as it is; 'basic': the "
                   "graph onnxruntime hands its execution providers after its basic "
                   "optimizations (constant folding, shape resolution, redundant nodes removed)")


def optimize_from_args(args: argparse.Namespace) -> OptimizeLevel:
    """The ``--optimize`` level; an unknown one is a :class:`ModelLoadError`."""
    level = getattr(args, "optimize", None) or "none"
    return check_choice("--optimize", level, OPTIMIZE_LEVELS, ModelLoadError)


def raw_graph_hint(args: argparse.Namespace, properties: Iterable[SubgraphProperty]
                   ) -> str | None:
    """The line suggesting ``--optimize basic`` when a selector of an onnxruntime execution
    provider (by the parsed properties' ``name``) partitioned the raw graph, else None."""
    if optimize_from_args(args) != "none":
        return None
    eps = sorted({getattr(prop, "name", "") for prop in properties} & ORT_EP_SELECTORS)
    if not eps:
        return None
    return (f"note: the raw graph was partitioned; onnxruntime optimizes the graph before its "
            f"execution providers ({', '.join(eps)}) see it: add --optimize basic to partition "
            "that graph")


def add_dim_arg(p: argparse.ArgumentParser) -> None:
    """--dim NAME=N (repeatable): fix a symbolic dim of the model's inputs."""
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                   help="fix the symbolic input dimension NAME to N before shape inference "
                   "(repeatable), as onnxruntime's make_dynamic_shape_fixed does")


def dims_from_args(args: argparse.Namespace) -> dict[str, int]:
    """``--dim NAME=N`` flags → ``{NAME: N}``; a malformed flag is a :class:`ModelLoadError`."""
    dims: dict[str, int] = {}
    for item in getattr(args, "dim", None) or []:
        name, sep, raw = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            dims[name.strip()] = int(raw.strip())
        except ValueError:
            raise ModelLoadError(f"--dim takes NAME=N with an integer N, got {item!r}") from None
    return dims


def add_constraint_args(p: argparse.ArgumentParser) -> None:
    """The constraint flags and the strategy option flags."""
    g = p.add_argument_group("constraints")
    g.add_argument("--value-inputs", default="default", metavar="RULES",
                   help="'default' (Reshape, Expand, Tile, Slice, Resize, ...), 'none', or "
                   "OP:POS[,POS];OP:POS... added to the defaults")
    g.add_argument("--cut", action="append", default=[], metavar="A,B",
                   help="an edge (node names) that must be cut")
    g.add_argument("--never", action="append", default=[], metavar="A,B",
                   help="two nodes (names) never in one cluster")
    g.add_argument("--together", action="append", default=[], metavar="A,B,...",
                   help="nodes (names) that must share a cluster")
    g.add_argument("--min-size", type=int, default=1, help="minimum nodes per cluster")
    g.add_argument("--max-size", type=int, default=None, help="maximum nodes per cluster")
    g.add_argument("--max-const-bytes", type=int, default=None,
                   help="maximum bytes of constants one cluster may hold")
    o = p.add_argument_group("strategy options")
    for owner, flag in option_flags():
        _add_flag(o, owner, flag)
    o.add_argument("--coalesce", action="store_true",
                   help="after the strategy, merge clusters of one device while valid (never "
                   "raises cut_bytes or partitions)")
    o.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="any other strategy option (value parsed as JSON when possible)")


def option_flags() -> list[tuple[str, OptionFlag]]:
    """Every strategy option with a flag of its own, once, with the first strategy (in registry
    order) that declares it."""
    seen: dict[str, tuple[str, OptionFlag]] = {}
    for spec in registered_specs():
        for flag in spec.flags:
            seen.setdefault(flag.name, (spec.name, flag))
    return list(seen.values())


def _add_flag(group: argparse._ArgumentGroup, owner: str, flag: OptionFlag) -> None:
    """``flag`` as a command-line flag of ``group``, its help prefixed by its strategy."""
    help_ = f"{owner}: {flag.help}"
    if flag.kind == "switch":
        group.add_argument(flag.flag, action="store_true", help=help_)
    elif flag.kind == "many":
        group.add_argument(flag.flag, action="append", default=[], metavar=flag.metavar,
                           help=help_)
    else:
        group.add_argument(flag.flag, type=flag.type, default=None, metavar=flag.metavar,
                           help=help_)


def strategy_help(default: str) -> str:
    """The ``--strategy`` help: the registered strategies (their modules not imported) and the
    default."""
    names = ", ".join(spec.name for spec in registered_specs())
    return f"clustering strategy: {names} (default: {default})"


def constraints_from_args(args: argparse.Namespace) -> Constraints:
    """Constraints from the constraint flags."""
    rules = args.value_inputs.strip()
    if rules == "none":
        value_inputs: dict[str, tuple[int, ...]] = {}
    else:
        value_inputs = dict(DEFAULT_VALUE_INPUTS)
        if rules != "default":
            for rule in rules.split(";"):
                op, sep, pos = rule.partition(":")
                try:
                    value_inputs[op.strip()] = tuple(int(x) for x in pos.split(","))
                    if not sep or not op.strip():
                        raise ValueError
                except ValueError:
                    raise ConstraintError(f"--value-inputs rule {rule!r} is not OP:POS[,POS]")\
                        from None
    return Constraints(
        cut_edges=[_pair(x, "--cut") for x in args.cut],
        never_together=[_pair(x, "--never") for x in args.never],
        value_inputs=value_inputs,
        together=[[s.strip() for s in x.split(",") if s.strip()] for x in args.together],
        min_size=args.min_size, max_size=args.max_size, max_const_bytes=args.max_const_bytes)


def _pair(text: str, flag: str) -> tuple[str, str]:
    parts = [s.strip() for s in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise ConstraintError(f"{flag} takes two node names separated by a comma, got {text!r}")
    return parts[0], parts[1]


def add_platform_arg(p: argparse.ArgumentParser, required: bool = False) -> None:
    """--platform FILE: the accelerators and CPUs of a throughput placement."""
    p.add_argument("--platform", metavar="FILE", required=required,
                   help="a platform file (accelerators: count, selector, memory, speed, link; "
                   "CPUs): place the model's nodes on its devices for throughput, as a "
                   "placement instance (docs/placement-instance.md)")


def instance_from_args(args: argparse.Namespace) -> PlacementInstance:
    """The placement instance of ``args.model`` on ``--platform`` (``--dim``, ``--optimize``
    as for any model)."""
    from clusterkit.constraints.platform import model_instance, read_platform

    if args.selector:
        raise UsageError("--platform names the devices and their selector: give no --selector",
                         getattr(args, "_prog", "clusterkit"))
    platform = read_platform(args.platform)
    graph = load_graph(args.model, dims=dims_from_args(args), optimize=optimize_from_args(args))
    return model_instance(graph, platform, name=model_label(args.model))


def problem_from_args(args: argparse.Namespace) -> Problem:
    """Load the model and compile the constraints with the selectors (or, with
    ``--platform``, the placement instance of the model on the platform)."""
    if getattr(args, "platform", None):
        inst = instance_from_args(args)
        graph = instance_graph(inst, source=args.model)
        return instance_problem(graph, constraints=constraints_from_args(args))
    if not args.selector and not is_instance_file(args.model):
        raise UsageError("the following arguments are required: --selector (unless MODEL is a "
                         "placement instance)", getattr(args, "_prog", "clusterkit"))
    start = time.perf_counter()
    source = model_source(args)
    graph = load_graph(source, dims=dims_from_args(args), optimize=optimize_from_args(args))
    if source is not args.model:  # read from a ModelProto: named after the file all the same
        graph.name = model_label(args.model)
    log.debug("read %s: %d nodes, %d edges in %.3f s", args.model, graph.n, graph.num_edges,
              time.perf_counter() - start)
    if not args.selector:  # a placement instance names its own devices
        return instance_problem(graph, constraints=constraints_from_args(args))
    props = parse_selectors(args.selector)
    check_op_types(args.selector, graph.op_types)
    return constraints_from_args(args).compile(graph, props, fallback=args.fallback)


def model_source(args: argparse.Namespace) -> Any:
    """The model the flags name: ``args.model``, or with ``--random-weights SEED`` its
    ModelProto with seeded random weights in place of its ``ConstantOfShape`` weight stubs
    (:func:`clusterkit.io.weights.random_weights`; made once per command)."""
    seed = getattr(args, "random_weights", None)
    if seed is None:
        return args.model
    if getattr(args, "_weighted", None) is None:
        from clusterkit.io.optimize import optimize_model
        from clusterkit.io.weights import random_weights

        args._weighted = random_weights(optimize_model(args.model, "none"), seed)
    return args._weighted


def strategy_options(args: argparse.Namespace) -> dict[str, Any]:
    """Strategy keyword options from the flags that were given."""
    opts: dict[str, Any] = {}
    for _, flag in option_flags():
        value = getattr(args, flag.name, None)
        if flag.kind == "value" and value is not None:
            opts[flag.name] = value
        elif flag.kind != "value" and value:  # a repeated flag given, a switch on
            opts[flag.name] = list(value) if flag.kind == "many" else True
    for item in getattr(args, "option", []):
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise StrategyError(f"--option takes KEY=VALUE, got {item!r}")
        opts[key.strip().replace("-", "_")] = json_or_text(raw)
    return opts


def options_for(strategy: str, shared: dict[str, Any]) -> dict[str, Any]:
    """The options of ``shared`` (:func:`strategy_options`) that ``strategy`` takes (cpsat:
    objective, time limit, ...; hetero: affinity), so that one set of flags serves several
    strategies."""
    params = inspect.signature(get_strategy(strategy)).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return dict(shared)
    return {k: v for k, v in shared.items() if k in params}


def check_output_args(args: argparse.Namespace, files: Iterable[str] = (),
                      folders: Iterable[str] = ()) -> None:
    """Refuse the output paths of the flags ``files`` (``json``, ``output``, ...) and the
    output folders of the flags ``folders`` (``dump_dot``) before any work: a missing folder
    is an error naming it (:func:`clusterkit.io.files.check_outputs`; none is ever created)."""
    check_outputs([getattr(args, f, None) for f in files],
                  [getattr(args, f, None) for f in folders])


def model_label(path: str) -> str:
    """The model name written into reports."""
    return os.path.splitext(os.path.basename(path))[0]


def json_or_text(raw: str) -> Any:
    """A flag's VALUE: parsed as JSON when it is JSON (numbers, booleans, lists), else the text."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw
