"""Launch an experiment or a sweep: ``python launch.py experiments/tiny_cpu.py [path=value ...]``.

The launcher (Fiddle graphs, overrides, validation, local / SLURM executors) is the subject of issue 6 and not
built yet; until then this entry point only checks its argument and says so, with exit code 2 as for any
command line it cannot run.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: python launch.py FILE.py [path=value ...]", file=sys.stderr)
        return 2
    target = Path(argv[0])
    if not target.is_file():
        print(f"launch.py: no such experiment or sweep file: {target}", file=sys.stderr)
        return 2
    print(f"launch.py: cannot run {target} yet: the trainer and launcher are not built (issues 5 and 6)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
