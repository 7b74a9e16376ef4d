"""Output for people: tables (rich on a terminal, plain columns in a file or a pipe) and the
messages on stderr that ``-v``/``-q`` turn up and down, while results stay on stdout and the
machine outputs stay byte for byte what they were."""

from __future__ import annotations

import io
import json
import re

import pytest

from clusterkit.cli import main as cli_main
from clusterkit.cli.tables import print_table, table_text
from support.models import BUNDLED_MODELS
from support.partitions import timeless

SQUEEZE = str(BUNDLED_MODELS / "squeezenet1_1.onnx")
SELECTOR = "ops:Conv,Relu,MaxPool"
COLUMNS = [("name", False), ("count", True), ("note", False)]
ROWS = [["alpha", "7", "plain"], ["[bold]b[/bold]", "12345", ":smile: <x> & y"],
        ["gamma-long-name", "0", ""]]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_plain_table_is_aligned_columns_with_cells_as_given():
    text = table_text(COLUMNS, ROWS, title="things:")
    lines = text.splitlines()
    assert lines[0] == "things:" and "\x1b" not in text
    assert _cells(lines[1]) == ["name", "count", "note"]
    assert [_cells(line) for line in lines[2:]] == [[c for c in r if c] for r in ROWS]
    # numbers right-aligned: every count ends in the same column; text left-aligned
    ends = {line.index(r[1]) + len(r[1]) for line, r in zip(lines[2:], ROWS)}
    starts = {line.index(r[0]) for line, r in zip(lines[2:], ROWS)}
    assert len(ends) == 1 and starts == {0}
    assert all(line == line.rstrip() for line in lines)
    assert table_text(COLUMNS, ROWS, title="things:") == text          # stable


def test_print_table_is_plain_off_a_terminal_and_rich_on_one(monkeypatch):
    for var in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    plain = io.StringIO()
    print_table(COLUMNS, ROWS, title="things:", file=plain)
    assert plain.getvalue() == table_text(COLUMNS, ROWS, title="things:") + "\n"
    term = _Terminal()
    print_table(COLUMNS, ROWS, title="things:", file=term)
    shown = term.getvalue()
    assert "\x1b[" in shown                         # styled: the bold header
    assert "[bold]b[/bold]" in shown and ":smile:" in shown     # never markup or emoji


def test_compare_prints_a_plain_table_of_the_json_rows(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert cli_main(["compare", SQUEEZE, "--selector", SELECTOR, "--strategies",
                     "singleton,cycles", "--json", str(out)]) == 0
    printed = capsys.readouterr()
    rows = json.loads(out.read_text())["rows"]
    lines = printed.out.splitlines()
    assert "\x1b" not in printed.out
    assert lines[0] == f"squeezenet1_1 (100 nodes) — selector {SELECTOR}"
    assert _cells(lines[1])[:3] == ["strategy", "partitions", "largest"]
    for line, row in zip(lines[2:], rows):
        cells = _cells(line)
        assert cells[0] == row["strategy"] and cells[1] == str(row["partitions"])
        assert cells[5] == f"{row['cut_bytes']:,}"
    assert len(lines) == 2 + len(rows)
    assert printed.err == f"wrote {out}\n"            # messages on stderr, not stdout


def _partition(capsys, tmp_path, before=(), after=()) -> tuple[str, str, bytes]:
    """stdout, stderr and the JSON of ``partition`` with flags before and after the
    subcommand."""
    out = tmp_path / "p.json"
    assert cli_main([*before, "partition", SQUEEZE, "--selector", SELECTOR, "--strategy",
                     "cycles", "--json", str(out), *after]) == 0
    printed = capsys.readouterr()
    return printed.out, printed.err, out.read_bytes()


def test_quiet_and_verbose_change_the_messages_only(tmp_path, capsys):
    out, err, doc = _partition(capsys, tmp_path)
    assert err == f"wrote {tmp_path / 'p.json'}\n"
    q_out, q_err, q_doc = _partition(capsys, tmp_path, before=["-q"])
    assert q_err == "" and q_out == out.replace(_seconds(out), _seconds(q_out))
    v_out, v_err, v_doc = _partition(capsys, tmp_path, after=["-v"])   # after the subcommand
    debug = [line for line in v_err.splitlines() if line.startswith("debug: ")]
    assert any(line.startswith("debug: clusterkit.cli.common: read ") for line in debug)
    assert any("strategy cycles:" in line for line in debug)
    assert f"wrote {tmp_path / 'p.json'}" in v_err.splitlines()
    assert "debug:" not in v_out and "wrote" not in v_out
    # the JSON is the same whatever the verbosity (but for the time it took)
    strip = [timeless(json.loads(d)) for d in (doc, q_doc, v_doc)]
    assert strip[0] == strip[1] == strip[2]


def _seconds(text: str) -> str:
    return re.search(r"\d+\.\d+s$", text.splitlines()[0]).group(0)


@pytest.mark.parametrize("flags", [["-q"], ["-qq"], ["-v"]])
def test_errors_stay_one_line_whatever_the_verbosity(flags, tmp_path, capsys):
    code = cli_main([*flags, "partition", str(tmp_path / "nosuch.onnx"), "--selector", "ops:A"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("clusterkit: error: ") and "nosuch.onnx" in err
