"""A self-contained HTML page with plotly figures that works, and can be audited, on an air-gapped cluster.

The page is one file: the plotly.js bundle that ships with the plotly package (``plotly.offline.get_plotlyjs()``,
what ``include_plotlyjs=True`` inlines) in a ``<script>`` element, each figure as a JSON block, and a short
script that draws them. Nothing is loaded from anywhere:

- **No URL in the source.** The bundle mentions URLs for features a dashboard of line plots never uses: map tile
  and style servers, the geo topojson CDN, the Chart Studio "edit" link, the plotly logo link, and license and
  issue links in comments. Each is rewritten from ``https://host/...`` to ``x-offline:host/...`` (so a stray use
  fails at once instead of waiting on a network that is not there) — except the XML namespace names in
  :data:`NAMESPACE_URIS`, which must stay: ``document.createElementNS`` needs them verbatim to make SVG elements,
  and a namespace name is an identifier that is compared, never fetched. Text that comes from the data (a wandb
  URL, a commit message, a config value) is shown as text, never as a link, with its ``//`` written as
  ``&#47;&#47;`` (HTML) or ``\\/\\/`` (JSON): it reads the same, and the source holds no URL literal.
  :func:`external_urls` audits a page; :func:`render_page` refuses to return one that fails the audit.
- **A Content-Security-Policy that forbids every fetch** (``default-src 'none'``; inline scripts and styles, and
  ``data:``/``blob:`` images only), so the browser itself blocks anything the audit could not see.
- **The page reports its own state**, for headless checks: the ``<html>`` element carries ``data-plots`` (how
  many figures), ``data-plots-rendered`` (how many plotly finished), ``data-render`` (``pending``, ``done`` or
  ``failed``) and ``data-errors`` (uncaught errors, rejected promises, ``console.error`` calls and CSP violations
  seen so far, whose messages are in ``<pre id="page-errors">``). ``chromium --headless --dump-dom`` shows them.
"""

from __future__ import annotations

import functools
import html
import json
import re
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

NAMESPACE_URIS = (
    "http://www.w3.org/2000/svg",
    "http://www.w3.org/1999/xlink",
    "http://www.w3.org/2000/xmlns/",
    "http://www.w3.org/1999/xhtml",
    "http://www.w3.org/XML/1998/namespace",
)
OFFLINE_SCHEME = "x-offline:"
CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'"
)
PLOT_CONFIG = {
    "responsive": True,
    "displaylogo": False,
    "showLink": False,
    "showEditInChartStudio": False,
    "showSendToCloud": False,
    "topojsonURL": "",
}

_URL_START = re.compile(r"(?i)\b(?:https?|wss?|ftp)://")
_URL_CHARS = re.compile(r"[^\s\"'`<>\\)(\]\[{},;]*")
_URL_CONTINUES = re.compile(r"[A-Za-z0-9._~%/?#=&:+-]")

_RECORDER = """
(function () {
  var root = document.documentElement, errors = [];
  function note(message) {
    errors.push(String(message));
    root.setAttribute('data-errors', String(errors.length));
    var box = document.getElementById('page-errors');
    if (box) { box.textContent = errors.join('\\n'); box.hidden = false; }
  }
  window.__notePageError = note;
  root.setAttribute('data-errors', '0');
  root.setAttribute('data-render', 'pending');
  window.addEventListener('error', function (e) {
    var where = e.filename ? ' (' + e.filename + ':' + e.lineno + ')' : '';
    note('error: ' + (e.message || (e.target && e.target.tagName) || e.type) + where);
  }, true);
  window.addEventListener('unhandledrejection', function (e) { note('unhandled rejection: ' + e.reason); });
  document.addEventListener('securitypolicyviolation', function (e) {
    note('blocked by the content security policy: ' + e.blockedURI + ' (' + e.violatedDirective + ')');
  });
  var consoleError = console.error;
  console.error = function () {
    note('console.error: ' + Array.prototype.map.call(arguments, String).join(' '));
    return consoleError.apply(console, arguments);
  };
})();
"""

_BOOT = """
(function () {
  var root = document.documentElement, note = window.__notePageError;
  var blocks = Array.prototype.slice.call(document.querySelectorAll('script[type="application/json"][data-plot]'));
  var config = JSON.parse(document.getElementById('plot-config').textContent);
  var rendered = 0;
  root.setAttribute('data-plots', String(blocks.length));
  root.setAttribute('data-plots-rendered', '0');
  if (typeof Plotly === 'undefined') {
    note('plotly.js did not load');
    root.setAttribute('data-render', 'failed');
    return;
  }
  Promise.all(blocks.map(function (block) {
    var figure = JSON.parse(block.textContent);
    return Plotly.newPlot(block.getAttribute('data-plot'), figure.data, figure.layout, config).then(function () {
      rendered += 1;
      root.setAttribute('data-plots-rendered', String(rendered));
    });
  })).then(function () {
    root.setAttribute('data-render', 'done');
  }, function (error) {
    note('plot failed: ' + error);
    root.setAttribute('data-render', 'failed');
  });
})();
"""


class PageAuditError(ValueError):
    """A page that would make a browser reach outside the file."""


@functools.cache
def offline_plotly_js() -> str:
    """The plotly.js bundle with every URL but the namespace names rewritten to the inert ``x-offline:`` scheme."""
    from plotly.offline import get_plotlyjs

    return defang_urls(get_plotlyjs()).replace("</script", "<\\/script")


def defang_urls(text: str) -> str:
    """``text`` with each URL that is not a namespace name given the ``x-offline:`` scheme instead of its own."""
    def replace(match: re.Match[str]) -> str:
        return match.group(0) if _is_namespace(text, match.start()) else OFFLINE_SCHEME

    return _URL_START.sub(replace, text)


def external_urls(page: str) -> list[str]:
    """Every URL in ``page`` other than the namespace names: what an audit of an offline page must find empty."""
    found = []
    for match in _URL_START.finditer(page):
        if not _is_namespace(page, match.start()):
            tail = _URL_CHARS.match(page, match.end())
            found.append(match.group(0) + (tail.group(0) if tail else ""))
    return found


def text(value: Any) -> str:
    """HTML-escaped text, with ``://`` written so that no URL literal reaches the page source."""
    return html.escape(str(value)).replace("://", ":&#47;&#47;")


def figure_block(figure: go.Figure, element_id: str, *, css_class: str = "plot") -> str:
    """A ``<div>`` for the figure and its JSON, drawn by the page's boot script."""
    spec = json.loads(pio.to_json(figure, validate=False))
    return (
        f'<div id="{html.escape(element_id)}" class="{html.escape(css_class)}"></div>\n'
        f'<script type="application/json" data-plot="{html.escape(element_id)}">{script_json(spec)}</script>\n'
    )


def script_json(obj: Any) -> str:
    """JSON safe inside a ``<script>`` element, with every ``/`` escaped (so no ``</script>`` and no URL)."""
    return (
        json.dumps(obj, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
        .replace("/", "\\/")
        .replace("<", "\\u003c")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def render_page(title: str, body: str, *, styles: str = "", head_extra: Sequence[str] = ()) -> str:
    """The complete page; raises :class:`PageAuditError` if anything in it is an external URL."""
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
        f"<script>{_RECORDER}</script>",
        f"<script>{offline_plotly_js()}</script>",
        "</head>",
        "<body>",
        body,
        '<pre id="page-errors" hidden></pre>',
        f'<script type="application/json" id="plot-config">{script_json(PLOT_CONFIG)}</script>',
        f"<script>{_BOOT}</script>",
        "</body>",
        "</html>",
        "",
    ])
    leaks = external_urls(page)
    if leaks:
        raise PageAuditError(f"the page would reach outside the file: {', '.join(sorted(set(leaks))[:5])}")
    return page


def _is_namespace(text: str, start: int) -> bool:
    for uri in NAMESPACE_URIS:
        if text.startswith(uri, start):
            end = start + len(uri)
            return end >= len(text) or not _URL_CONTINUES.match(text, end)
    return False
