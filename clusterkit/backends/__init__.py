"""Execution backends (plugin style)."""
