"""Compare every clustering strategy on a real model from Python.

Run: python examples/compare_strategies.py [MODEL.onnx] [SELECTOR]
"""

import sys
from pathlib import Path

import clusterkit as ck

#: the example models shipped with the repository
BUNDLED = Path(__file__).resolve().parents[1] / "tests" / "data" / "models"

model = sys.argv[1] if len(sys.argv) > 1 else str(BUNDLED / "mobilenet_v2.onnx")
selector = sys.argv[2] if len(sys.argv) > 2 else "ops:Conv,Relu,Clip,Add,GlobalAveragePool"
result = ck.compare(model, [selector], options={"cpsat": {"time_limit": 20}})
print(ck.format_table(result))
best = min((r for r in result.rows if r.error is None), key=lambda r: (r.cut_bytes, r.partitions))
print(f"\nlowest cut_bytes: {best.strategy} ({best.cut_bytes:,} bytes, "
      f"{best.partitions} partitions)")
