"""Options that take one word of a fixed set: ``Literal`` types declared once in
:mod:`clusterkit.modes`, checked at the door by one helper with one line naming the option and
its allowed values."""

from __future__ import annotations

import inspect
import typing

import networkx as nx
import pytest

import clusterkit as ck
from clusterkit import modes


def _chain():
    g = nx.DiGraph([("a", "b"), ("b", "c")])
    nx.set_node_attributes(g, {"a": "Conv", "b": "Relu", "c": "Conv"}, "op")
    return ck.from_networkx(g)


def test_check_choice_returns_the_word_or_names_option_and_choices():
    assert modes.check_choice("devices", "cost", modes.DEVICE_MODES) == "cost"
    with pytest.raises(ck.StrategyError) as err:
        modes.check_choice("devices", "fast", modes.DEVICE_MODES)
    assert str(err.value) == "devices must be one of priority, cost, got 'fast'"
    with pytest.raises(ck.ModelLoadError,
                       match=r"optimize must be one of none, basic, got \['x'\]"):
        modes.check_choice("optimize", ["x"], modes.OPTIMIZE_LEVELS, ck.ModelLoadError)


DOOR = {
    "devices": (lambda: ck.partition(_chain(), "ops:Conv", strategy="cycles", devices="fast"),
                ck.StrategyError, "devices must be one of priority, cost, got 'fast'"),
    "auto prefer": (lambda: ck.partition(_chain(), "ops:Conv", prefer="cost"),
                    ck.StrategyError,
                    "auto: option prefer must be one of cut, partitions, got 'cost'"),
    "cpsat method": (lambda: ck.partition(_chain(), "ops:Conv", strategy="cpsat", method="exact"),
                     ck.StrategyError,
                     "cpsat: option method must be one of auto, full, lns, got 'exact'"),
    "optimize level": (lambda: ck.load_graph("model.onnx", optimize="fast"),
                       ck.ModelLoadError, "optimize must be one of none, basic, got 'fast'"),
}


@pytest.mark.parametrize("case", sorted(DOOR))
def test_a_wrong_word_is_one_line_at_the_door(case):
    call, error, message = DOOR[case]
    with pytest.raises(error) as err:
        call()
    assert str(err.value) == message


def test_the_tuples_the_code_reads_are_the_literal_types():
    from clusterkit.engines.cpsat import lns
    from clusterkit.io import optimize
    from clusterkit.passes import devices

    assert devices.MODES == typing.get_args(modes.DeviceMode) == ("priority", "cost")
    assert lns.METHODS == typing.get_args(modes.Method) == ("auto", "full", "lns")
    assert optimize.OPTIMIZE_LEVELS == typing.get_args(modes.OptimizeLevel) == ("none", "basic")


def test_the_front_door_declares_the_types():
    from clusterkit import api
    from clusterkit.io import loader

    assert typing.get_type_hints(api.run_strategy)["devices"] == modes.DeviceMode | None
    assert typing.get_type_hints(api.partition)["devices"] == modes.DeviceMode | None
    # (its other annotations name networkx, imported for type checkers only: read the text)
    assert inspect.signature(loader.load_graph).parameters["optimize"].annotation \
        == "OptimizeLevel" and loader.OptimizeLevel is modes.OptimizeLevel
