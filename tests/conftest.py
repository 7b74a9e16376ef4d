"""Shared fixtures: the real models (onnx's light set and ../shared/models) and small graphs."""

from __future__ import annotations

import os
from pathlib import Path

import onnx
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CLUSTERKIT_SHARED", REPO.parent / "shared"))
SHARED_MODELS = SHARED / "models"
LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _models(folder: Path) -> list[Path]:
    found = sorted(folder.glob("*.onnx"))
    if not found:
        raise RuntimeError(f"no ONNX models in {folder}: the tests need ../shared/models beside "
                           "the repository (or CLUSTERKIT_SHARED) and the onnx package")
    return found


LIGHT_MODELS = _models(LIGHT_DIR)
SHARED_MODEL_PATHS = _models(SHARED_MODELS)
ALL_MODELS = LIGHT_MODELS + SHARED_MODEL_PATHS
#: every real model except the 11k-node llama (kept for tests that are linear-time)
SMALL_MODELS = [p for p in ALL_MODELS if "llama" not in p.name]


def model_id(path: Path) -> str:
    return path.stem


@pytest.fixture(scope="session")
def resnet18_path() -> Path:
    return SHARED_MODELS / "resnet18.onnx"
