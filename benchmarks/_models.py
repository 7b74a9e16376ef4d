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


def real_weights(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """A copy of ``model`` whose weight stubs (``ConstantOfShape`` nodes named
    ``weight_stub/...`` fed by a shape initializer, see ``tests/data/models/README.md``) are
    initializers of their full size, each with values of its own: a float stub's value times a
    factor drawn per element from [0.9, 1.1), an integer or bool stub's value repeated.

    A timing of the stubbed file flatters one whole-model session: onnxruntime's common
    subexpression elimination merges stubs of equal shape and value into one tensor, so that
    the session's weights are a fraction of the real model's and stay in cache, which a model
    with real weights, or one split into sessions, cannot do."""
    import numpy as np
    from onnx import numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    shapes = {t.name: t for t in g.initializer}
    rng = np.random.default_rng(seed)
    kept, made, used = [], [], set()
    for node in g.node:
        if node.op_type != "ConstantOfShape" or not node.name.startswith("weight_stub/") \
                or node.input[0] not in shapes:
            kept.append(node)
            continue
        shape = tuple(int(d) for d in numpy_helper.to_array(shapes[node.input[0]]))
        fill = next((numpy_helper.to_array(a.t) for a in node.attribute if a.name == "value"),
                    np.zeros(1, np.float32)).reshape(-1)[0]
        if np.issubdtype(fill.dtype, np.floating):
            values = (fill * rng.uniform(0.9, 1.1, size=shape)).astype(fill.dtype)
        else:
            values = np.full(shape, fill, dtype=fill.dtype)
        made.append(numpy_helper.from_array(values, node.output[0]))
        used.add(node.input[0])
    needed = {t for n in kept for t in n.input} | {o.name for o in g.output}
    inits = [t for t in g.initializer if t.name not in used or t.name in needed]
    del g.node[:], g.initializer[:]
    g.node.extend(kept)
    g.initializer.extend(inits + made)
    return out
