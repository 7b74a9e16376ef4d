"""Reading and writing: ONNX, networkx / node-link JSON, DOT, plans and partition JSON, ONNX export.

Every file clusterkit writes goes through :mod:`clusterkit.io.files` (complete or not at all).
Reading a model, a graph or a plan never executes code.
"""
