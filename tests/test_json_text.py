"""The partition JSON writer writes exactly the text ``json.dumps(..., indent=1)`` writes."""

from __future__ import annotations

import json
import random

import pytest

from clusterkit.io.json_text import indented_json, indented_json_chunks

_LEAVES = [0, -5, 2 ** 70, 1.5, -0.0, 1e300, float("nan"), float("inf"), float("-inf"),
           'q"uote\n\u00e9\u4e2d\x00', True, False, None, "", (1, 2), [], {}]


def _value(rng: random.Random, depth: int):
    r = rng.random()
    if depth > 3 or r < 0.4:
        return rng.choice(_LEAVES)
    if r < 0.65:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    if r < 0.75:
        return [rng.randint(-99, 99) for _ in range(rng.randint(0, 6))]
    if r < 0.82:
        return [rng.choice(["x", "y\u00e9", "\\"]) for _ in range(rng.randint(0, 6))]
    return {rng.choice(["k", "l", 'm"', "\u00e9"]): _value(rng, depth + 1)
            for _ in range(rng.randint(0, 4))}


@pytest.mark.parametrize("seed", range(20))
def test_same_text_as_json_dumps(seed):
    rng = random.Random(seed)
    for _ in range(100):
        value = _value(rng, 0)
        assert indented_json(value) == json.dumps(value, indent=1)


class _Int(int):
    pass


@pytest.mark.parametrize("value", [{1: 2}, {None: 1}, {"a": _Int(3)}, [_Int(1), 2], [True, 1],
                                   {"a": {"b": {1: [2, 3]}}}, [[{"x": _Int(4)}]]])
def test_what_it_does_not_know_is_left_to_json(value):
    assert indented_json(value) == json.dumps(value, indent=1)


def test_refuses_what_json_refuses():
    with pytest.raises(TypeError):
        indented_json({"a": object()})


@pytest.mark.parametrize("seed", range(10))
def test_rows_sharing_their_keys_same_text(seed):
    rng = random.Random(seed)
    keys = rng.sample(["id", "device", "nodes", "%s", "name\u00e9"], rng.randint(1, 5))
    rows = [{k: _value(rng, 2) for k in keys} for _ in range(rng.randint(1, 8))]
    if seed % 2:  # one row with its keys in another order: not a table
        rows.append({k: 1 for k in reversed(keys)})
    value = {"clusters": rows, "assignment": [{"nodes": rows}]}
    assert indented_json(value) == json.dumps(value, indent=1)


@pytest.mark.parametrize("pairs", [[], [("a", "Conv")], [('q"\u00e9', "ai.x:Op"), ("1", "Relu")],
                                   [(str(i), f"Op{i % 7}") for i in range(20000)]])
def test_fingerprint_hashes_the_compact_json_of_the_pairs(pairs):
    import hashlib

    from clusterkit.result.json_format import model_fingerprint

    text = json.dumps([list(p) for p in pairs], separators=(",", ":"))
    assert model_fingerprint(iter(pairs)) == \
        "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.mark.parametrize("seed", range(5))
def test_pieces_in_small_blocks_make_the_same_text(seed, monkeypatch):
    import clusterkit.io.json_text as json_text

    monkeypatch.setattr(json_text, "BLOCK", 3)
    rng = random.Random(seed)
    value = {"rows": [{"id": i, "nodes": [i, i + 1]} for i in range(rng.randint(0, 10))],
             "ints": list(range(rng.randint(0, 10))), "deep": [_value(rng, 0) for _ in range(9)]}
    pieces = list(indented_json_chunks(value))
    assert "".join(pieces) == json.dumps(value, indent=1)
    assert len(pieces) > 3


def test_streamed_pieces_are_written_whole_or_not_at_all(tmp_path):
    from clusterkit.io.files import write_all

    out = tmp_path / "p.json"
    write_all([(out, iter(["{", '"a": 1', "}"]))])
    assert out.read_text() == '{"a": 1}'

    def broken():
        yield "{"
        raise ValueError("no more")

    with pytest.raises(ValueError, match="no more"):
        write_all([(tmp_path / "q.json", broken())])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]


@pytest.mark.parametrize("length,size", [(0, 3), (1, 1), (5, 2), (20, 7), (9000, 4096)])
def test_blocks_encode_as_the_list_they_make(length, size):
    from clusterkit.io.json_text import Blocks

    rows = [{"id": k, "device": "npu" if k % 3 else "cpu", "nodes": list(range(k % 4)),
             "names": [f"n{k}"] * (k % 3)} for k in range(length)]

    def blocks():
        yield []  # an empty block adds nothing
        for start in range(0, length, size):
            yield rows[start:start + size]

    doc = {"a": 1, "clusters": Blocks(length, blocks), "z": [1, 2]}
    want = json.dumps({"a": 1, "clusters": rows, "z": [1, 2]}, indent=1)
    assert "".join(indented_json_chunks(doc)) == want


def test_partition_json_text_is_json_dumps_of_partition_json():
    import clusterkit as ck
    from clusterkit.graph.fast import graph_from_dag
    from clusterkit.result.json_format import partition_json, partition_json_text
    from clusterkit.testing.synthetic import long_edge_dag

    graph = graph_from_dag(long_edge_dag(3000, seed=1))
    part = ck.partition(graph, "ops:S0,S1,S2,S3,S4,S5,S6,S7", strategy="cycles")
    assert len(part.clusters) > 16
    text = partition_json_text(part)
    assert text == json.dumps(partition_json(part), indent=1) + "\n"
    assert json.loads(text)["clusters"][5]["nodes"] == sorted(
        int(part.graph.index_to_source[v]) for v in part.clusters[5].nodes)


@pytest.mark.parametrize("block", [5, 64, 8192])
def test_partition_json_text_in_blocks_is_json_dumps_of_partition_json(block, monkeypatch):
    """The clusters' text, made from their columns a block at a time, is json.dumps' text of
    their dicts; a block with a cluster the template cannot hold (an id that is a bool, an
    empty cluster) is encoded from its dicts, and the blocks around it as before."""
    import dataclasses

    import clusterkit as ck
    import clusterkit.result.json_format as json_format
    from clusterkit.graph.fast import graph_from_dag
    from clusterkit.result.cluster import Cluster
    from clusterkit.testing.synthetic import long_edge_dag

    monkeypatch.setattr(json_format, "BLOCK", block)
    graph = graph_from_dag(long_edge_dag(3000, seed=2))
    part = ck.partition(graph, "ops:S0,S1,S2,S3,S4,S5,S6,S7", strategy="cycles")
    assert len(part.clusters) > 3 * block or block == 8192
    for p in (part, dataclasses.replace(part, clusters=(
            Cluster(True, "cpu", ()), *part.clusters[:7], Cluster(7, "npu", ()),
            *part.clusters[7:]))):
        text = json_format.partition_json_text(p)
        assert text == json.dumps(json_format.partition_json(p), indent=1) + "\n"
    clusters = json.loads(text)["clusters"]
    assert clusters[0] == {"id": True, "device": "cpu", "nodes": [], "names": [],
                           "op_types": []}
    assert clusters[9]["names"] == [graph.nodes[v].name for v in sorted(
        part.clusters[7].nodes, key=lambda v: int(graph.index_to_source[v]))]
