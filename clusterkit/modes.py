"""The options that take one word of a fixed set, each declared once as a ``Literal`` type, and
the one check of such a word at the door.

A function takes the type (``devices: DeviceMode``), and where a value arrives from outside
(the front door, a strategy's entry, the command line) :func:`check_choice` refuses any other
word with one line naming the option and its allowed values.
"""

from __future__ import annotations

from typing import Literal, TypeVar, get_args

from clusterkit.errors import ClusterkitError, StrategyError

#: how a node that several devices take gets its device (:mod:`clusterkit.engines.devices`)
DeviceMode = Literal["priority", "cost"]
#: what ``auto`` ranks after the fallback nodes
Prefer = Literal["cut", "partitions"]
#: how cpsat solves: one exact model per part, large-neighbourhood search, or chosen by size
Method = Literal["auto", "full", "lns"]
#: the objectives by name (cpsat also takes weights: ``"cut=1,partitions=1000"`` or a mapping)
ObjectiveName = Literal["cut", "partitions", "throughput", "latency"]
#: the onnxruntime graph optimizations a model is read after (``none``: the raw graph)
OptimizeLevel = Literal["none", "basic"]

DEVICE_MODES: tuple[DeviceMode, ...] = get_args(DeviceMode)
PREFERENCES: tuple[Prefer, ...] = get_args(Prefer)
METHODS: tuple[Method, ...] = get_args(Method)
OBJECTIVE_NAMES: tuple[ObjectiveName, ...] = get_args(ObjectiveName)
OPTIMIZE_LEVELS: tuple[OptimizeLevel, ...] = get_args(OptimizeLevel)

T = TypeVar("T", bound=str)


def check_choice(option: str, value: object, allowed: tuple[T, ...],
                 error: type[ClusterkitError] = StrategyError) -> T:
    """``value`` when it is one of ``allowed``, else ``error`` (a :class:`StrategyError`
    unless given) naming ``option`` and the allowed words."""
    for word in allowed:
        if value == word:
            return word
    raise error(f"{option} must be one of {', '.join(allowed)}, got {value!r}")
