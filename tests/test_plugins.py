"""Third-party selectors and strategies as plug-ins: a real package (``tests/data/acme_plugin``)
installed with pip into a folder of its own declares entry points in the groups
``clusterkit.selectors`` and ``clusterkit.strategies``, and clusterkit finds both by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import onnx
import pytest

import clusterkit.registry as registry_module
from clusterkit.errors import StrategyError
from clusterkit.registry import Registry
from support.models import BUNDLED_MODELS, REPO

PLUGIN = REPO / "tests" / "data" / "acme_plugin"
RESNET = BUNDLED_MODELS / "resnet18.onnx"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The plug-in package installed by pip into a folder of its own."""
    target = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                           "--no-build-isolation", "--disable-pip-version-check",
                           "--target", str(target), str(PLUGIN)],
                          capture_output=True, text=True, timeout=300, cwd=target)
    assert done.returncode == 0, done.stderr
    return target


def clusterkit_cli(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(site))
    return subprocess.run([sys.executable, "-m", "clusterkit", *args], capture_output=True,
                          text=True, timeout=300, env=env, cwd=site)


def test_a_plugin_selector_and_strategy_work_by_name(site, tmp_path):
    out = tmp_path / "p.json"
    done = clusterkit_cli(site, "partition", str(RESNET), "--selector", "acme_npu",
                          "--strategy", "acme_singletons", "--json", str(out))
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert data["strategy"] == "acme_singletons"
    ops = [n.op_type for n in onnx.load(str(RESNET)).graph.node]
    taken = sorted(v for c in data["clusters"] if c["device"] == "acme_npu" for v in c["nodes"])
    assert taken == [i for i, op in enumerate(ops) if op in ("Conv", "Relu")]


def test_plugin_settings_and_listing(site, tmp_path):
    listing = clusterkit_cli(site, "selectors")
    assert listing.returncode == 0 and "acme_npu" in listing.stdout and "relu" in listing.stdout
    out = tmp_path / "p.json"
    done = clusterkit_cli(site, "partition", str(RESNET), "--selector", "acme_npu[relu=false]",
                          "--strategy", "singleton", "--json", str(out))
    assert done.returncode == 0, done.stderr
    ops = [n.op_type for n in onnx.load(str(RESNET)).graph.node]
    taken = {ops[v] for c in json.loads(out.read_text())["clusters"]
             if c["device"] == "acme_npu" for v in c["nodes"]}
    assert taken == {"Conv"}


def test_without_the_plugin_the_names_are_unknown(tmp_path):
    done = subprocess.run([sys.executable, "-m", "clusterkit", "partition", str(RESNET),
                           "--selector", "acme_npu"], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 2 and "unknown selector 'acme_npu'" in done.stderr


def _fake_group(monkeypatch, *pairs: tuple[str, str]) -> None:
    eps = [metadata.EntryPoint(name, value, "test.group") for name, value in pairs]
    monkeypatch.setattr(registry_module.metadata, "entry_points",
                        lambda group=None: [e for e in eps if e.group == group])


def test_a_plugin_never_replaces_a_shipped_name(monkeypatch):
    _fake_group(monkeypatch, ("cycles", "os.path:join"))
    reg = Registry("strategy", StrategyError, {"cycles": "os.path:basename"},
                   group="test.group")
    with pytest.raises(StrategyError, match="plug-in 'cycles'.*already has"):
        reg.get("cycles2")


def test_a_plugin_is_loaded_lazily_and_listed(monkeypatch):
    _fake_group(monkeypatch, ("joiner", "os.path:join"))
    reg = Registry("strategy", StrategyError, {"base": "os.path:basename"}, group="test.group")
    assert reg.names() == ["base", "joiner"] and reg.get("joiner") is os.path.join
    with pytest.raises(StrategyError, match="already registered"):
        reg.register("joiner", print)
