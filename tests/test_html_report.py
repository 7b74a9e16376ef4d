"""``clusterkit report``: one self-contained HTML page, read back with the standard library's
HTML parser — every section there with its content, the figures those of ``partition --json``
on the same command line, nothing fetched from elsewhere, and hostile node names shown as text,
never as markup."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from clusterkit.analysis.compare import COLUMNS
from clusterkit.cli import main as cli_main
from support.models import BUNDLED_MODELS

SQUEEZE = str(BUNDLED_MODELS / "squeezenet1_1.onnx")
SELECTOR = "acc=ops:Conv,Relu,MaxPool"          # leaves Concat, Flatten, ... on the fallback
STRATEGIES = ["singleton", "cycles", "longest-path", "cpsat"]
HAS_DOT = shutil.which("dot") is not None


class Page(HTMLParser):
    """The page as the parser sees it: the start tags in order (with the ``id`` of the section
    they sit in), the text of each section, the rows of each table (by table ``id``) and every
    attribute."""

    VOID = {"meta", "br", "img", "hr", "link", "input", "source", "path", "polygon", "ellipse",
            "polyline"}

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, str | None, dict]] = []
        self.text: dict[str | None, list[str]] = {}
        self.tables: dict[str, list[list[str]]] = {}
        self.ids: list[str] = []
        self._stack: list[tuple[str, dict]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self.feed(text)
        self.close()

    @property
    def section(self) -> str | None:
        ids = [a.get("id") for t, a in self._stack if t == "section"]
        return ids[-1] if ids else None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, self.section, attrs))
        if "id" in attrs:
            self.ids.append(attrs["id"])
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        if tag not in self.VOID:
            self._stack.append((tag, attrs))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            table = next(a.get("id") for t, a in reversed(self._stack) if t == "table")
            self.tables.setdefault(table, []).append(self._row)
            self._row = None
        while self._stack:
            open_tag, _ = self._stack.pop()
            if open_tag == tag:
                break

    def handle_data(self, data):
        self.text.setdefault(self.section, []).append(data)
        if self._cell is not None:
            self._cell.append(data)

    def section_text(self, ident: str) -> str:
        return " ".join(self.text.get(ident, []))

    def rows(self, table: str) -> list[dict[str, str]]:
        header, *body = self.tables[table]
        return [dict(zip(header, row)) for row in body]


def _report(tmp_path, model, *flags) -> tuple[Page, str]:
    out = tmp_path / "report.html"
    assert cli_main(["report", str(model), "-o", str(out), *flags]) == 0
    text = out.read_text(encoding="utf-8")
    return Page(text), text


@pytest.fixture(scope="module")
def squeeze(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    page, text = _report(tmp, SQUEEZE, "--selector", SELECTOR, "--strategy", "cycles",
                         "--strategies", ",".join(STRATEGIES))
    doc = tmp / "p.json"
    assert cli_main(["partition", SQUEEZE, "--selector", SELECTOR, "--strategy", "cycles",
                     "--json", str(doc)]) == 0
    return page, text, json.loads(doc.read_text())


def test_every_section_is_there_in_order(squeeze):
    page, text, _ = squeeze
    sections = [a["id"] for tag, _, a in page.tags if tag == "section"]
    assert sections == ["summary", "compare", "partition", "fallback", "splits"]
    assert text.startswith("<!DOCTYPE html>") and len(set(page.ids)) == len(page.ids)


def test_summary_gives_the_figures_of_partition_json(squeeze):
    page, _, doc = squeeze
    facts = {r["field"]: r["value"] for r in page.rows("facts")}
    assert facts["model"] == "squeezenet1_1" and facts["strategy"] == "cycles"
    assert facts["selector"] == SELECTOR
    assert facts["nodes"] == str(len(onnx.load(SQUEEZE).graph.node))
    metrics = {r["metric"]: r["value"] for r in page.rows("metrics")}
    assert metrics["partitions"] == str(doc["metrics"]["partitions"])
    assert metrics["cut_bytes"].replace(",", "") == str(doc["metrics"]["cut_bytes"])
    devices = {r["device"]: r for r in page.rows("devices")}
    acc_nodes = sum(len(c["nodes"]) for c in doc["clusters"] if c["device"] == "acc")
    acc_clusters = sum(1 for c in doc["clusters"] if c["device"] == "acc")
    assert devices["acc"]["nodes"] == str(acc_nodes)
    assert devices["acc"]["clusters"] == str(acc_clusters)
    assert "cpu (fallback)" in devices


def test_compare_has_one_row_per_strategy(squeeze):
    page, _, doc = squeeze
    rows = page.rows("compare-table")
    assert [r["strategy"] for r in rows] == STRATEGIES
    assert list(rows[0]) == [header for header, _ in COLUMNS]
    cycles = next(r for r in rows if r["strategy"] == "cycles")
    assert cycles["partitions"] == str(doc["metrics"]["partitions"])
    assert cycles["cut_bytes"].replace(",", "") == str(doc["metrics"]["cut_bytes"])
    assert next(r for r in rows if r["strategy"] == "cpsat")["gap vs cpsat"] == "+0.0%"


@pytest.mark.skipif(not HAS_DOT, reason="Graphviz's dot is not installed")
def test_partition_section_holds_the_picture_inline(squeeze):
    page, _, doc = squeeze
    inside = [(tag, a) for tag, sec, a in page.tags if sec == "partition"]
    assert sum(1 for tag, _ in inside if tag == "svg") == 1
    nodes = [a for tag, a in inside if tag == "g" and a.get("class") == "node"]
    boxes = [a for tag, a in inside if tag == "g" and a.get("class") == "cluster"]
    assert len(nodes) == len(onnx.load(SQUEEZE).graph.node)
    assert len(boxes) == sum(1 for c in doc["clusters"] if c["device"] == "acc")


def test_fallback_lists_every_fallen_back_node_with_its_reason(squeeze):
    page, _, doc = squeeze
    names = [nd.name for nd in onnx.load(SQUEEZE).graph.node]
    folded = set(doc["folded"])
    expected = {names[v] for c in doc["clusters"] if c["device"] == "cpu" for v in c["nodes"]
                if v not in folded}
    rows = page.rows("fallen-back")
    assert expected and {r["node"] for r in rows} == expected and len(rows) == len(expected)
    assert all(r["reason"] and r["detail"] for r in rows)
    by_reason = {r["reason"]: int(r["nodes"]) for r in page.rows("reasons")}
    assert sum(by_reason.values()) == len(expected)
    assert f"fell back: {len(expected)} nodes" in page.section_text("fallback")


def test_the_page_fetches_nothing(squeeze):
    page, text, _ = squeeze
    tags = {tag for tag, _, _ in page.tags}
    assert not tags & {"script", "link", "img", "iframe", "object", "embed"}
    for tag, _, attrs in page.tags:
        for key, value in attrs.items():
            if key.startswith("xmlns"):
                continue     # a namespace name, never fetched
            assert not key.startswith("on"), (tag, key)
            assert "://" not in (value or ""), (tag, key, value)
    assert "url(" not in text and "@import" not in text


HOSTILE = ['<script>alert("x")</script>', "a&b <i>", "q\"uote'", '</section><section id="summary">',
           "[bold]x[/bold] :smile:"]


def hostile_model(path: Path) -> None:
    """A chain Relu -> Relu -> Abs -> Relu -> Abs whose nodes have hostile names; with
    ``ops:Relu`` the Abs nodes fall back."""
    nodes, prev = [], "x"
    for k, name in enumerate(HOSTILE):
        op = "Abs" if k in (2, 4) else "Relu"
        nodes.append(helper.make_node(op, [prev], [f"t{k}"], name=name))
        prev = f"t{k}"
    graph = helper.make_graph(nodes, "g<&>\"", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4])], [helper.make_tensor_value_info(
            prev, TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_hostile_node_names_are_text_not_markup(tmp_path):
    model = tmp_path / "hostile.onnx"
    hostile_model(model)
    page, text = _report(tmp_path, model, "--selector", "ops:Relu", "--strategy", "singleton",
                         "--strategies", "singleton,cycles")
    assert [a["id"] for tag, _, a in page.tags if tag == "section"] == [
        "summary", "compare", "partition", "fallback", "splits"]
    assert not any(tag in ("script", "i") for tag, _, _ in page.tags)
    fell = {r["node"] for r in page.rows("fallen-back")}
    assert fell == {HOSTILE[2], HOSTILE[4]}        # the Abs nodes, names intact
    splits = page.section_text("splits")   # singleton splits the first two nodes
    assert f"{HOSTILE[0]} (Relu) -> {HOSTILE[1]} (Relu)" in splits
    if HAS_DOT:     # Graphviz writes each label line as a text element of the picture
        picture = page.text["partition"]
        assert all(name in picture for name in HOSTILE)
    assert "<script>" not in text and "<i>" not in text


def test_without_graphviz_the_page_shows_the_dot_text(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))          # no dot program to be found
    page, _ = _report(tmp_path, SQUEEZE, "--selector", SELECTOR, "--strategies", "none")
    inside = {tag for tag, sec, _ in page.tags if sec == "partition"}
    assert "svg" not in inside and "pre" in inside
    said = page.section_text("partition")
    assert "dot program is not installed" in said and said.count(" -> ") > 50
    assert "No comparison was run" in page.section_text("compare")
    err = capsys.readouterr().err
    assert "clusterkit: warning: the report shows the DOT text" in err


@pytest.mark.skipif(not Path("/usr/bin/chromium").exists() or not HAS_DOT,
                    reason="no headless browser (/usr/bin/chromium)")
def test_a_headless_browser_draws_the_page(tmp_path, squeeze):
    page_file = tmp_path / "page.html"
    page_file.write_text(squeeze[1], encoding="utf-8")
    shot = tmp_path / "page.png"
    done = subprocess.run(["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-background-networking", "--no-first-run",
                           f"--screenshot={shot}", "--window-size=1200,2000",
                           page_file.as_uri()], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000     # not a blank page


def test_options_reach_the_strategies_that_take_them(tmp_path, capsys):
    # --time-limit is cpsat's (compared), not auto's (the report's strategy): no error
    page, _ = _report(tmp_path, SQUEEZE, "--selector", SELECTOR, "--strategies", "cpsat",
                      "--time-limit", "30")
    assert [r["strategy"] for r in page.rows("compare-table")] == ["cpsat"]
    assert page.rows("compare-table")[0]["status"] == "OPTIMAL"
    # an option no strategy of the report takes is refused by name, and nothing is written
    out = tmp_path / "bad.html"
    assert cli_main(["report", SQUEEZE, "--selector", SELECTOR, "--strategies", "cycles",
                     "--option", "bogus=1", "-o", str(out)]) == 2
    assert "no option 'bogus'" in capsys.readouterr().err and not out.exists()
