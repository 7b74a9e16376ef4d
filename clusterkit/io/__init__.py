"""Reading models and graphs (ONNX, networkx / node-link JSON, placement instances, the EPs'
own answers) and writing files atomically; one layer, just above the graph.

Every file clusterkit writes goes through :mod:`clusterkit.io.files` (complete or not at all).
Reading a model or a graph never executes code. The writers that need the partition or the
fused graph live with them: :mod:`clusterkit.result.json_format`,
:mod:`clusterkit.result.plan`, :mod:`clusterkit.result.dot` and :mod:`clusterkit.export`.
"""
