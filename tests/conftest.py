"""Shared fixtures: the real models (onnx's light set and the bundled ``tests/data/models``)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
SHARED_MODELS = DATA / "models"
SHARED = DATA
LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _models(folder: Path) -> list[Path]:
    found = sorted(folder.glob("*.onnx"))
    if not found:
        raise RuntimeError(f"no ONNX models in {folder}: the repository ships them in "
                           "tests/data/models and the onnx package ships its light set")
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
