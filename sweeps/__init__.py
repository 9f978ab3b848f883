"""Sweep files: a base experiment, axes, seeds, metric and early stopping (issue 7)."""
