"""Reading and writing: ONNX, networkx / node-link JSON, DOT, plans and partition JSON, ONNX export.

Reading a model, a graph or a plan never executes code.
"""
