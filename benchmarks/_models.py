"""The real models the benchmarks read: the repository's bundled models and onnx's light set."""

from __future__ import annotations

from pathlib import Path

import onnx

REPO = Path(__file__).resolve().parent.parent
#: the torchvision / transformer model graphs bundled with the repository
BUNDLED_MODELS = REPO / "tests" / "data" / "models"
#: the nine model graphs the onnx package ships
LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def light_models() -> list[Path]:
    """onnx's light set, sorted by name."""
    return sorted(LIGHT_DIR.glob("*.onnx"))


def bundled_models() -> list[Path]:
    """The bundled models, sorted by name."""
    return sorted(BUNDLED_MODELS.glob("*.onnx"))
