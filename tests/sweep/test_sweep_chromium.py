"""The sweep report's page in a real headless Chromium, as ``tests/nightly/test_nightly_chromium.py`` opens the
dashboard (its helper, flags and channels): every figure renders, none needs WebGL (Chromium runs with
``--disable-gpu``, where plotly's WebGL traces show "WebGL is not supported by your browser" instead).

What the page did is read back from the DOM Chromium dumps (plotly's drawn SVG, and a probe appended to a copy of the
page that writes each ``<img>``'s ``naturalWidth`` onto ``<html>`` once the page has loaded), its console and its
network log. A screenshot shows the heatmap painted. A control page shows that the checks catch a WebGL figure
(plotly's ``parcoords``, which the page used to have) and an image that does not load.
"""

from __future__ import annotations

import re
from pathlib import Path

import plotly.graph_objects as go
import pytest
from PIL import Image

from ppo.nightly.page import figure_block, render_page
from tests.nightly.test_nightly_chromium import CHROMIUM, Visit, chromium
from tests.sweep.conftest import lam_grid
from tests.sweep.test_sweep_report import report

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (bash .ci/chromium-setup.sh installs Debian's package)"
)

PROBE = """<script>window.addEventListener("load", function () {
  document.documentElement.setAttribute("data-image-widths",
    Array.prototype.map.call(document.images, function (img) { return img.naturalWidth; }).join(" "));
});</script>"""
FIGURES = ("by_axis", "heatmap", "curves", "parallel", "history", "importance")
VIRIDIS_TOP = (253, 231, 37)  # the heatmap's best cell


def probed(page: Path, copy: Path) -> Path:
    copy.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    return copy


def image_widths(visit: Visit) -> list[int] | None:
    found = re.search(r'data-image-widths="([\d ]*)"', visit.stdout)
    return [int(w) for w in found.group(1).split()] if found else None


def problems(page: str, visit: Visit) -> list[str]:
    """Why a figure of ``page`` did not render in ``visit``; empty when every one did."""
    found = []
    shown = re.sub(r"<script\b[^>]*>.*?</script>", "", visit.stdout, flags=re.S)  # plotly.js holds the message too
    if "WebGL is not supported" in shown:
        found.append("a figure needs WebGL")
    widths = image_widths(visit)
    if widths is None or len(widths) != page.count("<img ") or 0 in widths:
        found.append(f"images not loaded: widths {widths}")
    drawn = {part.partition('"')[0]: part for part in visit.stdout.split('data-plot="')[1:]}  # up to the next plot
    for plot in re.findall(r'data-plot="([^"]+)"', page):
        if 'class="main-svg"' not in drawn.get(plot, "") or 'class="js-line"' not in drawn.get(plot, ""):
            found.append(f"plot {plot} drew no SVG trace")
    if visit.console:
        found.append(f"console: {visit.console[:3]}")
    if visit.requests:
        found.append(f"requests: {visit.requests}")
    return found


@pytest.fixture(scope="module")
def sweep_page(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("sweep_chromium")
    result = report(lam_grid(root / "lam_grid"), "--out", root / "report")
    assert result.returncode == 0, result.stderr
    page = root / "report" / "report.html"
    return {"root": root, "page": page, "html": page.read_text()}


@pytest.mark.slow
def test_every_figure_renders_without_webgl(sweep_page):
    root = sweep_page["root"]
    visit = chromium(probed(sweep_page["page"], root / "probed.html"), root / "dom", "--dump-dom")
    assert problems(sweep_page["html"], visit) == []
    assert re.findall(r'data-figure="(\w+)"', sweep_page["html"]) == list(FIGURES)
    files = [Image.open(root / "report" / f"{name}.png").width for name in FIGURES]
    assert image_widths(visit) == files  # each <img> decoded to its file's size
    assert sweep_page["html"].count('data-plot="') == 1  # the interactive curves of the best configurations


@pytest.mark.slow
def test_the_screenshot_shows_the_heatmap(sweep_page):
    shot = sweep_page["root"] / "report.png"
    visit = chromium(sweep_page["page"], sweep_page["root"] / "shot", f"--screenshot={shot}", "--window-size=1400,1600")
    with Image.open(shot) as image:
        colours = {rgb for _, rgb in image.convert("RGB").getcolors(maxcolors=1400 * 1600)}
    assert len(colours) > 200, f"only {len(colours)} colours: a blank or unstyled page"
    assert any(all(abs(c - t) <= 3 for c, t in zip(rgb, VIRIDIS_TOP)) for rgb in colours), "no heatmap cell painted"
    assert visit.console == [] and visit.requests == []


@pytest.mark.slow
def test_the_checks_catch_a_webgl_figure_and_a_broken_image(tmp_path):
    parcoords = go.Figure(go.Parcoords(dimensions=[{"label": "a", "values": [1, 2]}, {"label": "b", "values": [2, 1]}]))
    html = render_page("control", figure_block(parcoords, "parcoords")
                       + '<img src="data:image/png;base64,AAAA" alt="not a PNG">')
    (tmp_path / "control.html").write_text(html)
    visit = chromium(probed(tmp_path / "control.html", tmp_path / "probed.html"), tmp_path / "dom", "--dump-dom")
    found = problems(html, visit)
    assert {"a figure needs WebGL", "images not loaded: widths [0]", "plot parcoords drew no SVG trace"} <= set(found)
