"""Helpers the test modules share: model paths, random problem generators, reference graphs."""
