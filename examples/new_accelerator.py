"""A selector for a new accelerator in about 30 lines.

Our imaginary "tinynpu" runs Conv (not grouped/depthwise), Relu, Add and MaxPool, and holds at
most 24 nodes per subgraph: the selector keeps count while a cluster grows (stateful), and
`reset` forgets the count. Run: python examples/new_accelerator.py [MODEL.onnx]
"""

import sys
from pathlib import Path

import clusterkit as ck

#: the example models shipped with the repository
BUNDLED = Path(__file__).resolve().parents[1] / "tests" / "data" / "models"


class TinyNpuSelector(ck.SubgraphSelector):
    OPS = {"Conv", "Relu", "Add", "MaxPool"}

    def __init__(self, limit=24):
        self.limit, self.taken = limit, 0

    def select(self, node):
        ok = node.op_type in self.OPS and node.attrs.get("group", 1) == 1
        self.taken += ok
        return ok

    def select_input(self, node, new_node):
        return self.taken < self.limit and self.select(new_node)

    def select_output(self, node, new_node):
        return self.taken < self.limit and self.select(new_node)

    def reset(self):
        self.taken = 0


class TinyNpu(ck.SubgraphProperty):
    def __init__(self, device="tinynpu"):
        super().__init__(device)

    def create_subgraph_selector(self):
        return TinyNpuSelector()


if __name__ == "__main__":
    model = sys.argv[1] if len(sys.argv) > 1 else str(BUNDLED / "resnet18.onnx")
    result = ck.partition(model, [TinyNpu()])  # the default strategy keeps the 24-node limit
    print(result.summary())
