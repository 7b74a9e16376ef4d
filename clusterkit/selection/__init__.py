"""The selector protocol (MXNet's subgraph API), selector specs and the selector registry."""
