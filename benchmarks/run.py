"""Run every benchmarks/bench_*.py and write bench/results.json and bench/results.md.

Each module exposes ``run(quick: bool = False) -> dict`` with ``title``, ``columns``, ``rows``
and ``notes``. Speed figures are ratios against a baseline run in the same process, so they
survive a noisy shared machine better than raw seconds; raw seconds are reported too.

    python benchmarks/run.py [--quick] [--only engines,fusion] [--keep] [--out bench]

Each section records the commit and the date it ran at. ``--keep`` keeps the sections of an
existing ``OUT/results.json`` that this run does not produce (``--only`` with ``--keep``
refreshes some sections of a full run and leaves the others, with their own commit and date).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

from clusterkit.io.files import write_all

HERE = Path(__file__).resolve().parent


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def to_markdown(section: dict) -> str:
    cols = section["columns"]
    lines = [f"## {section['title']}", ""]
    if "commit" in section:
        lines += [f"_commit {section['commit']}, {section['date']}_", ""]
    lines += ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for row in section["rows"]:
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    for note in section.get("notes", []):
        lines.append("")
        lines.append(f"- {note}")
    return "\n".join(lines) + "\n"


def _commit() -> str:
    """The repository's HEAD commit (short), or "?" outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "?"
    return out.stdout.strip() or "?"


def _kept(path: str, sections: list[dict]) -> list[dict]:
    """``sections`` plus the sections of the results file at ``path`` that they do not
    replace, in file-name order."""
    try:
        with open(path, encoding="utf-8") as f:
            old = json.load(f).get("sections", [])
    except (OSError, ValueError):
        return sections
    fresh = {s["name"] for s in sections}
    merged = sections + [s for s in old if s.get("name") not in fresh]
    return sorted(merged, key=lambda s: s.get("name", ""))


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--only", default="", help="comma-separated bench names (file stems "
                        "without bench_)")
    parser.add_argument("--out", default="bench", help="output folder")
    parser.add_argument("--keep", action="store_true", help="keep the sections of an existing "
                        "OUT/results.json that this run does not produce")
    args = parser.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    sections, failures = [], []
    for path in sorted(HERE.glob("bench_*.py")):
        name = path.stem[len("bench_"):]
        if only and name not in only:
            continue
        print(f"== {name}", flush=True)
        start = time.perf_counter()
        try:
            section = _load(path).run(quick=args.quick)
        except Exception:
            traceback.print_exc()
            failures.append(name)
            continue
        section["name"] = name
        section["seconds"] = time.perf_counter() - start
        section["commit"], section["date"] = _commit(), time.strftime("%Y-%m-%d %H:%M:%S")
        sections.append(section)
        print(to_markdown(section), flush=True)
    os.makedirs(args.out, exist_ok=True)
    if args.keep:
        sections = _kept(os.path.join(args.out, "results.json"), sections)
    meta = {"python": sys.version.split()[0], "machine": platform.machine(),
            "cpus": os.cpu_count(), "quick": args.quick,
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    report = f"# clusterkit benchmarks\n\n{meta}\n\n" + "\n".join(map(to_markdown, sections))
    write_all([(os.path.join(args.out, "results.json"), json.dumps(
        {"meta": meta, "sections": sections, "failed": failures}, indent=1)),
        (os.path.join(args.out, "results.md"), report)])
    print(f"wrote {args.out}/results.json and {args.out}/results.md")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
