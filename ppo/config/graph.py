"""``--graph FILE``: the experiment graph drawn by ``fiddle.graphviz``.

``.dot``/``.gv`` write the Graphviz source (no program needed); other suffixes (``.svg``, ``.png``, ``.pdf``) are
rendered by Graphviz's ``dot``, which on Debian is ``apt-get install graphviz``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import fiddle as fdl

from ppo.config.errors import ConfigError

SOURCE_SUFFIXES = (".dot", ".gv")


def render_graph(cfg: fdl.Buildable, out: str | Path) -> Path:
    from fiddle import graphviz

    out = Path(out)
    fmt = out.suffix.lstrip(".").lower()
    if not fmt:
        raise ConfigError(f"--graph {out}: give the file a suffix (.svg, .png, .pdf, or .dot for the source)")
    if out.suffix.lower() not in SOURCE_SUFFIXES and shutil.which("dot") is None:
        raise ConfigError(f"--graph {out} needs Graphviz's dot program (apt-get install graphviz); "
                          f"or write the source with --graph {out.with_suffix('.dot')}")
    source = graphviz.render(cfg).source
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix.lower() in SOURCE_SUFFIXES:
        out.write_text(source)
        return out
    result = subprocess.run(["dot", f"-T{fmt}", "-o", str(out)], input=source.encode(), capture_output=True)
    if result.returncode != 0:
        first = (result.stderr.decode(errors="replace").strip().splitlines() or ["failed"])[0]
        raise ConfigError(f"--graph {out}: dot -T{fmt} failed: {first}")
    return out
