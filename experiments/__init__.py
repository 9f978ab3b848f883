"""Experiment recipes: one file per recipe, each with a `config()` returning an fdl.Config graph and its NIGHTLY checks.

`tiny_cpu.py` is the embedded CPU default; the GPU recipes (`math_1b.py`, `qwen2p5_1p5b_gsm8k.py`, `dsr1_7b.py`) derive
from the base builder in `_base.py` and change only what differs.  Files starting with `_` hold shared code, not
experiments.
"""
