"""Shared fixtures; the model paths themselves live in ``support.models``.

Hypothesis runs derandomized by default (the same examples on every run, no example database),
so a CI run is reproducible; ``HYPOTHESIS_PROFILE=explore make test`` draws fresh examples.

Tests marked ``slow`` still run; they are collected first, so that pytest-xdist hands them out
while the many short tests fill the gaps, instead of one long test running alone at the end.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from support.models import BUNDLED_MODELS

settings.register_profile("deterministic", derandomize=True, database=None)
settings.register_profile("explore", database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


@pytest.fixture(scope="session")
def resnet18_path() -> Path:
    return BUNDLED_MODELS / "resnet18.onnx"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The ``slow`` tests first, each group in its collected order."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
