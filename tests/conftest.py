"""Shared fixtures; the model paths themselves live in ``support.models``."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.models import BUNDLED_MODELS


@pytest.fixture(scope="session")
def resnet18_path() -> Path:
    return BUNDLED_MODELS / "resnet18.onnx"
