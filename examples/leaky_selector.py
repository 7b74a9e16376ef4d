"""A selector with two mistakes that ``clusterkit check-selector`` finds: ``reset`` forgets to
clear the count it keeps while a cluster grows, and ``explain`` gives no reason for a node
``select`` refuses (a strided Conv)."""

import clusterkit as ck


class LeakySelector(ck.SubgraphSelector):
    def __init__(self, limit=4):
        self.limit, self.taken = limit, 0

    def select(self, node):
        ok = node.op_type in {"Conv", "Relu"} and max(node.attrs.get("strides", [1])) == 1
        self.taken += ok
        return ok

    def select_output(self, node, new_node):
        return self.taken < self.limit and self.select(new_node)

    def reset(self):
        pass  # mistake: the count survives a reset


class LeakyNpu(ck.SubgraphProperty):
    def __init__(self, device="leaky"):
        super().__init__(device)

    def create_subgraph_selector(self):
        return LeakySelector()

    def explain(self, node):
        if node.op_type not in {"Conv", "Relu"}:
            return f"{node.op_type} is not in the op table"
        return None  # mistake: a strided Conv is refused without a reason
