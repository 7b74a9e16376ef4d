"""The README never lies: every shell block of the README and of the docs pages is run, and what
it prints is compared with what the page shows.

What is run, block by block (fenced code blocks of ``README.md`` and ``docs/*.md``):

- a block whose first line starts with ``$ `` is a session: its ``$ `` lines are commands, run in
  order in one bash shell (variables and ``$?`` carry over) from a scratch folder that sees the
  repository's ``tests``, ``examples`` and ``benchmarks``; the lines after a command are its
  output (stdout and stderr together, in order), compared line by line:

  - a line ``...`` stands for any number of lines, ``...`` inside a line for any text;
  - seconds may differ: ``0.028s`` matches any ``N.NNNs``, and ``~0.012`` any number;
  - runs of spaces match any run of spaces (tables are aligned to their widest cell);

- a block whose lines start with ``clusterkit `` is a synopsis: each subcommand it names must
  exist and each ``--flag`` it shows must be in that subcommand's ``-h``;
- a ``python`` block that starts with ``import clusterkit`` is run with ``python`` from the same
  scratch folder and must not fail.

A failure shows the command and the diff between the page and the actual output.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pytest

from support.models import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHARED = ("tests", "examples", "benchmarks", "selectors")
MARK = "@@clusterkit-readme-end@@"
#: commands a page may show after ``$ `` but that the test will not run (they change the machine)
NOT_RUN = ("pip ", "make ", "sudo ", "apt", "git ", "rm ")


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    lines: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.page.name}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page."""
    out: list[Block] = []
    current: Block | None = None
    for k, line in enumerate(page.read_text().splitlines(), 1):
        fence = re.match(r"^```(\w*)\s*$", line)
        if fence and current is None:
            current = Block(page, k, fence.group(1))
        elif line.startswith("```") and current is not None:
            out.append(current)
            current = None
        elif current is not None:
            current.lines.append(line)
    return out


def _all(kind: str) -> list[Block]:
    found = []
    for page in PAGES:
        for b in blocks(page):
            first = b.lines[0] if b.lines else ""
            if kind == "session" and b.lang in ("", "console", "sh", "shell", "bash") \
                    and first.startswith("$ "):
                found.append(b)
            elif kind == "synopsis" and b.lang == "" and first.startswith("clusterkit "):
                found.append(b)
            elif kind == "python" and b.lang == "python" and first.startswith("import clusterkit"):
                found.append(b)
    return found


# ---------------------------------------------------------------------- sessions
def commands(block: Block) -> list[tuple[str, list[str]]]:
    """(command, the output the page shows) for each ``$ `` line of a session block."""
    out: list[tuple[str, list[str]]] = []
    for line in block.lines:
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            out[-1][1].append(line)
    return out


def line_pattern(line: str) -> str:
    """The regular expression one shown line stands for."""
    parts = []
    for piece in re.split(r"(\.\.\.|~\d[\d.,]*|\d+\.\d+s\b|\s+)", line.rstrip()):
        if piece == "...":
            parts.append(r"[^\n]*?")
        elif piece.startswith("~"):
            parts.append(r"\d[\d.,]*")
        elif re.fullmatch(r"\d+\.\d+s", piece):
            parts.append(r"\d+\.\d+s")
        elif piece and piece.isspace():
            parts.append(r"[ \t]+")
        else:
            parts.append(re.escape(piece))
    return "".join(parts)


def matches(shown: list[str], actual: str) -> bool:
    """Does the actual output fit the shown lines (see the module docstring)?"""
    pattern = "".join(r"(?:[^\n]*\n)*?" if line.strip() == "..." else line_pattern(line) + r"\n"
                      for line in shown)
    text = "".join(line.rstrip() + "\n" for line in actual.splitlines())
    return re.fullmatch(pattern, text) is not None


def scratch(tmp_path: Path) -> Path:
    """A folder where the pages' commands run: it sees the repository's shared folders."""
    for name in SHARED:
        os.symlink(REPO / name, tmp_path / name)
    return tmp_path


def run_session(cmds: list[str], cwd: Path) -> list[str]:
    """Each command's output (stdout and stderr in order), run one after the other in one bash
    shell."""
    script = "".join(f"{c}\n__rc=$?; echo '{MARK}'; (exit $__rc)\n" for c in cmds)
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="200", NO_COLOR="1",
               PATH=os.pathsep.join([str(Path(sys.executable).parent),
                                     os.environ.get("PATH", "")]))
    proc = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=1800)
    return proc.stdout.split(MARK + "\n")[:len(cmds)]


def diff(shown: list[str], actual: str) -> str:
    return "\n".join(difflib.unified_diff(shown, actual.splitlines(), "the page shows",
                                          "the command prints", lineterm=""))


@pytest.mark.slow
@pytest.mark.parametrize("block", _all("session"), ids=lambda b: b.id)
def test_a_shell_block_prints_what_the_page_shows(block, tmp_path):
    cmds = commands(block)
    refused = [c for c, _ in cmds if c.lstrip().startswith(NOT_RUN)]
    assert not refused, (f"{block.id}: a session block may not {refused[0]!r}; show such a "
                         "command without '$ ' in a block of its own")
    outputs = run_session([c for c, _ in cmds], scratch(tmp_path))
    assert len(outputs) == len(cmds), f"{block.id}: the session stopped early"
    failures = [f"$ {c}\n{diff(shown, out)}" for (c, shown), out in zip(cmds, outputs)
                if not matches(shown, out)]
    assert not failures, f"{block.id}: the output drifted from the page\n" + "\n\n".join(failures)


# ---------------------------------------------------------------------- synopses and snippets
@pytest.mark.parametrize("block", _all("synopsis"), ids=lambda b: b.id)
def test_a_synopsis_names_only_commands_and_flags_that_exist(block):
    command = None
    for line in block.lines:
        head = re.match(r"^clusterkit (\w[\w-]*)", line)
        if head and not head.group(1).startswith("-"):
            command = head.group(1)
        flags = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", line.split("#")[0]))
        if not flags or command is None:
            continue
        text = _help(command)
        missing = sorted(f for f in flags if f not in text)
        assert not missing, f"{block.id}: clusterkit {command} has no {missing}"


@lru_cache(maxsize=None)
def _help(command: str) -> str:
    """``clusterkit COMMAND -h`` as the installed parser prints it (in this process: one
    subprocess per command cost a second each for imports)."""
    from clusterkit.cli import build_parser

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        build_parser().parse_args([command, "-h"])
    assert done.value.code == 0, f"clusterkit {command} -h exits {done.value.code}"
    return out.getvalue()


@pytest.mark.parametrize("block", _all("python"), ids=lambda b: b.id)
def test_a_library_snippet_runs(block, tmp_path):
    proc = subprocess.run([sys.executable, "-c", "\n".join(block.lines)], cwd=scratch(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{block.id}:\n{proc.stderr}"


# ---------------------------------------------------------------------- the mechanism itself
def test_the_matcher_elides_only_what_the_markers_say():
    shown = ["m: strategy auto, 2 partitions, ..., 0.028s", "...", "table  ~0.012  ok"]
    assert matches(shown, "m: strategy auto, 2 partitions, x, y, 1.500s\na\nb\ntable    3.1  ok\n")
    assert matches(shown, "m: strategy auto, 2 partitions, x, 0.1s\ntable 0.5 ok\n")
    assert not matches(shown, "m: strategy auto, 3 partitions, x, 0.1s\ntable 0.5 ok\n")
    assert not matches(shown, "m: strategy auto, 2 partitions, x, 0.1s\ntable 0.5 failed\n")
    assert not matches(["a"], "a\nextra\n") and matches(["a", "..."], "a\nextra\n")
    assert commands(Block(Path("x"), 1, "", ["$ a", "1", "$ b", "$ c", "2"])) == [
        ("a", ["1"]), ("b", []), ("c", ["2"])]
