"""Build the nightly regression dashboard: one self-contained HTML file from a history directory.

    python analysis/dashboard.py nightly/ --out dashboard.html [--repo .] [--nights 30] [--title "..."]

HISTORY is what `analysis/nightly.py` writes (format: ppo/nightly/history.py). The page shows a recipes × nights
matrix coloured PASS / FAIL / INFRA-FAIL with the failing checks and values in each cell; per recipe, each checked
value over the nights with its threshold, the latest night's key-metric curves over the recipe's baseline band, and
for each first FAIL after a PASS the commits in between (`git log --oneline` in --repo, default the current
directory) and the flattened-config diff.

The file works offline (clusters are air-gapped): plotly.js is inlined, the page holds no URL other than the SVG/XML
namespace names plotly needs, and its Content-Security-Policy forbids every fetch (ppo/nightly/page.py says how and
why). Open it from disk or any static file server; the page sets data-render="done" on <html> once every plot drew.

Exit status: 0 written; 2 a bad command line, a missing history directory, or an unwritable output file.
Unreadable record files do not stop the build: they are listed at the bottom of the page and on standard error.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import NoReturn

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from ppo.atomic import write_text_atomic  # noqa: E402 - after the checkout is put on sys.path
from ppo.nightly.report import DEFAULT_NIGHTS, build_dashboard  # noqa: E402

PROG = "dashboard.py"
USAGE_ERROR = 2


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("history", type=Path, metavar="HISTORY", help="history directory written by nightly.py")
    parser.add_argument("--out", type=Path, default=Path("dashboard.html"), help="output HTML file")
    parser.add_argument("--repo", type=Path, default=Path("."), help="git repository for the commits between nights")
    parser.add_argument("--nights", type=int, default=DEFAULT_NIGHTS, help="show the last N nights (0: all)")
    parser.add_argument("--title", default="Nightly regression dashboard")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format=f"{PROG}: %(message)s")
    if not args.history.is_dir():
        print(f"{PROG}: error: no such history directory: {args.history}", file=sys.stderr)
        return USAGE_ERROR
    page = build_dashboard(args.history, repo=args.repo, nights=args.nights, title=args.title)
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(args.out, page)
    except OSError as exc:
        print(f"{PROG}: error: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return USAGE_ERROR
    print(f"{PROG}: wrote {args.out} ({len(page) / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
