"""Where the real models live: the repository's ``tests/data/models`` and onnx's light set."""

from __future__ import annotations

from pathlib import Path

import onnx

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
#: the torchvision / transformer model graphs bundled with the repository
BUNDLED_MODELS = DATA / "models"
#: the nine model graphs the onnx package ships
LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _models(folder: Path) -> list[Path]:
    found = sorted(folder.glob("*.onnx"))
    if not found:
        raise RuntimeError(f"no ONNX models in {folder}: the repository ships them in "
                           "tests/data/models and the onnx package ships its light set")
    return found


LIGHT_MODELS = _models(LIGHT_DIR)
BUNDLED_MODEL_PATHS = _models(BUNDLED_MODELS)
ALL_MODELS = LIGHT_MODELS + BUNDLED_MODEL_PATHS


def model_id(path: Path) -> str:
    """A model's test id: its file stem."""
    return path.stem
