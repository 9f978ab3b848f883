"""The dashboard in a real headless Chromium: it renders every plot, logs no error, fetches nothing, and paints.

The history holds several synthetic nights plus one night made by ``nightly.py record`` from a run directory with a
metrics log written by the library's writer. Chromium runs with the network-quiet flags below; what the page did is
read back three ways: ``--dump-dom`` (the page's own state attributes, written by ppo/nightly/page.py's recorder,
and plotly's ``.main-svg`` elements), Chromium's console log on stderr (``--enable-logging=stderr``), and a
``--screenshot`` decoded with tests/nightly/png_decode.py. A control page with a deliberate error and a blocked
fetch shows that both error channels do report.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ppo.nightly.page import external_urls, render_page

from tests.nightly.conftest import run_cli, synthetic_history, write_experiment, write_run_dir
from tests.nightly.png_decode import decode_png

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (bash .ci/chromium-setup.sh installs Debian's package)"
)

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--virtual-time-budget=15000", "--enable-logging=stderr", "--v=0",
]
STATUS_BACKGROUNDS = {"PASS": (0xC8, 0xE6, 0xC9), "FAIL": (0xFF, 0xCD, 0xD2), "INFRA-FAIL": (0xE0, 0xE0, 0xE0)}


def chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, page.resolve().as_uri()],
        capture_output=True, text=True, timeout=180, check=False,
    )


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def root_attributes(dom: str) -> dict[str, str]:
    tag = re.search(r"<html\b[^>]*>", dom)
    assert tag, dom[:500]
    return dict(re.findall(r'(data-[\w-]+)="([^"]*)"', tag.group(0)))


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("chromium")
    history = root / "history"
    synthetic_history(history, root / "repo")
    run_dir = write_run_dir(root / "runs" / "tiny_cpu-recorded", seed=11, commit="c" * 40,
                            config={"policy.optimizer.lr": "2e-05"})
    experiment = write_experiment(root / "tiny_cpu.py")
    recorded = run_cli("nightly.py", "record", run_dir, "--recipe", "tiny_cpu", "--night", "2025-06-05",
                       "--history", history, "--experiment", experiment)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    out = root / "dashboard.html"
    built = run_cli("dashboard.py", history, "--out", out, "--repo", root / "repo")
    assert built.returncode == 0, built.stderr
    return {"root": root, "page": out, "html": out.read_text()}


def test_every_plot_renders_without_errors(dashboard):
    done = chromium(dashboard["page"], dashboard["root"] / "profile-dom", "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    attrs = root_attributes(dom)
    expected = dashboard["html"].count('<script type="application/json" data-plot=')
    assert expected >= 5
    assert attrs == {
        "data-errors": "0", "data-render": "done", "data-plots": str(expected), "data-plots-rendered": str(expected),
    }, re.search(r'<pre id="page-errors"[^>]*>(.*?)</pre>', dom, re.S).group(1)
    assert dom.count('class="main-svg"') >= 2 * expected
    assert len(re.findall(r'<path class="js-line"', dom)) >= expected
    assert console_lines(done.stderr) == []
    assert "2025-06-05" in dom and "tiny_cpu" in dom


def test_the_screenshot_shows_the_matrix_and_plots(dashboard):
    shot = dashboard["root"] / "dashboard.png"
    done = chromium(dashboard["page"], dashboard["root"] / "profile-shot", f"--screenshot={shot}",
                    "--window-size=1400,2000")
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    image = decode_png(shot.read_bytes())
    assert (image.width, image.height) == (1400, 2000)
    colours = {c[:3] for c in image.colours()}
    assert len(colours) > 200, f"only {len(colours)} colours: a blank or unstyled page"
    for status, rgb in STATUS_BACKGROUNDS.items():
        assert bytes(rgb) in colours, f"no {status} cell colour {rgb} in the screenshot"
    assert console_lines(done.stderr) == []
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(shot) as reference:
        pixels = reference.convert("RGB")
        for x, y in [(0, 0), (700, 150), (1399, 1999), (123, 456), (900, 1500)]:
            assert image.pixel(x, y)[:3] == pixels.getpixel((x, y))


def test_the_page_holds_no_url_but_namespace_names(dashboard):
    assert external_urls(dashboard["html"]) == []


def test_the_error_channels_do_report(tmp_path):
    """A control page: an uncaught error and a fetch that the Content-Security-Policy must block."""
    body = (
        "<script>undefined_function_for_the_test();</script>"
        "<script>fetch('ht' + 'tps:' + '//example.invalid/x').catch(function () {});</script>"
    )
    page = tmp_path / "control.html"
    page.write_text(render_page("control", body))
    done = chromium(page, tmp_path / "profile", "--dump-dom")
    attrs = root_attributes(done.stdout)
    assert int(attrs["data-errors"]) >= 2, done.stdout[-3000:]
    errors = re.search(r'<pre id="page-errors"[^>]*>(.*?)</pre>', done.stdout, re.S).group(1)
    assert "undefined_function_for_the_test" in errors
    assert "blocked by the content security policy" in errors and "connect-src" in errors
    assert any("undefined_function_for_the_test" in line for line in console_lines(done.stderr))
