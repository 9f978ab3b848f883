"""A self-contained HTML page of plotly figures that works, and can be audited, on an air-gapped cluster.

The page is one file: plotly.js inlined once in ``<head>`` (``plotly.offline.get_plotlyjs()``, what
``plotly.io.to_html(include_plotlyjs=True)`` inlines), and each figure as ``plotly.io.to_html`` writes it
(a ``<div>`` and the script that draws it), wrapped in ``<div class="plot" data-plot="ID">``. Nothing is fetched:

- **A Content-Security-Policy that forbids every fetch** (:data:`CSP`: ``default-src 'none'``; inline scripts and
  styles, and ``data:``/``blob:`` images and fonts only). plotly.js knows URLs for features a dashboard of line
  plots never uses (map tiles, the geo topojson files, MathJax); were one used, the browser would block it and say
  so on its console. The real-Chromium test shows that the dashboard makes no request and logs nothing.
- **No URL in the page's own content**, so no link leads out of it either (the CSP governs fetches, not clicks):
  text from the data (a wandb URL, a commit message, a config value) goes through :func:`text`, which writes
  ``://`` as ``:&#47;&#47;``; plotly's JSON writes every ``/`` as ``\\u002f``; the plotly logo link is off.
  :func:`render_page` refuses a page in which :func:`external_urls` finds anything.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'"
)
PLOT_CONFIG = {"responsive": True, "displaylogo": False}

_URL = re.compile(r"(?i)\b(?:https?|wss?|ftp)://[^\s\"'`<>\\)(\]\[{},;]*")


class PageAuditError(ValueError):
    """A page whose own content holds a URL."""


def text(value: Any) -> str:
    """HTML-escaped text, with ``://`` written so that no URL literal reaches the page source."""
    return html.escape(str(value)).replace("://", ":&#47;&#47;")


def figure_block(figure: go.Figure, element_id: str, *, css_class: str = "plot") -> str:
    """The figure as ``plotly.io.to_html`` writes it (no plotly.js: the page carries it once)."""
    drawn = pio.to_html(
        figure, config=PLOT_CONFIG, include_plotlyjs=False, full_html=False, div_id=element_id, validate=False
    )
    return f'<div class="{html.escape(css_class)}" data-plot="{html.escape(element_id)}">{drawn}</div>\n'


def external_urls(page: str) -> list[str]:
    """Every URL in ``page`` outside the inlined plotly.js: what the audit of an offline page must find empty."""
    return _URL.findall(page.replace(get_plotlyjs(), ""))


def render_page(title: str, body: str, *, styles: str = "", head_extra: Sequence[str] = ()) -> str:
    """The complete page; raises :class:`PageAuditError` if its own content holds a URL."""
    page = "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{text(title)}</title>",
        f"<style>{styles}</style>",
        *head_extra,
        f"<script>{get_plotlyjs()}</script>",
        "</head>",
        "<body>",
        body,
        "</body>",
        "</html>",
        "",
    ])
    leaks = external_urls(page)
    if leaks:
        raise PageAuditError(f"the page would reach outside the file: {', '.join(sorted(set(leaks))[:5])}")
    return page
