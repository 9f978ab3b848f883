"""Experiment recipes: one file per recipe, each with a `config()` returning an fdl.Config graph (issue 6)."""
