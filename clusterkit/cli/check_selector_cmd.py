"""``clusterkit check-selector SPEC [--model M.onnx ...]``: every conformance rule of
:mod:`clusterkit.testing.conformance` on a selector, one line each (``pass``, ``FAIL`` with the
failures, or ``n/a`` with the reason when the rule had nothing to judge: a rule whose calls
were never made is never a pass).

Exit 0 when every rule passes, 1 when one fails, 2 on an error (a file that does not import,
a model that does not load).
"""

from __future__ import annotations

import argparse

from clusterkit.selection.specs import parse_selector
from clusterkit.testing.conformance import DEFAULT_MODELS, RuleResult, rule_results

#: failures printed per rule
SHOWN = 5


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("check-selector", help="run the selector conformance checks on a selector "
                       "file (or any --selector spec)")
    p.add_argument("spec", metavar="FILE.py", help="a Python file defining a SubgraphProperty, or "
                   "any --selector spec (a shipped name, [DEVICE=]ops:OP,OP)")
    p.add_argument("--model", action="append", default=[], metavar="M.onnx",
                   help="a model to check on (repeatable; default: the onnx package's light "
                   f"models {', '.join(DEFAULT_MODELS)})")
    p.add_argument("--seeds", type=int, default=32, metavar="N",
                   help="growths started per model (default 32)")
    return p


def result_lines(result: RuleResult) -> list[str]:
    """One line for the rule, then its failures (at most :data:`SHOWN`)."""
    status = {"pass": "pass", "fail": "FAIL", "n/a": "n/a "}[result.status]
    text = f"not judged: {result.reason}" if result.status == "n/a" else result.doc
    lines = [f"{status}  {result.rule:<13}  {text}"]
    lines += [f"      {text}" for text in result.failures[:SHOWN]]
    if len(result.failures) > SHOWN:
        lines.append(f"      ... and {len(result.failures) - SHOWN} more")
    return lines


def main(args: argparse.Namespace) -> int:
    prop = parse_selector(args.spec)
    report, results = rule_results(prop, args.model or None, max_seeds=args.seeds)
    print(f"{report.subject} on {', '.join(report.graphs)}: {report.nodes} nodes, "
          f"{report.calls} calls, {report.seeds} growths")
    for result in results:
        print("\n".join(result_lines(result)))
    counts = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "n/a")}
    print(f"{len(results)} checks: {counts['pass']} pass, {counts['fail']} fail, "
          f"{counts['n/a']} n/a")
    return 1 if counts["fail"] else 0
