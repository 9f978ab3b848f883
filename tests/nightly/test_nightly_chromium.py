"""The dashboard in a real headless Chromium: it renders every plot, logs no error, fetches nothing, and paints.

The history holds several synthetic nights plus one night made by ``nightly.py record`` from a run directory that
the real launch.py made. Chromium runs with the network-quiet flags below; what the page did is read back three
ways: ``--dump-dom`` (plotly's drawn figures), Chromium's console on stderr (``--enable-logging=stderr``: uncaught
errors, and every request the Content-Security-Policy blocked), and Chromium's network log (``--log-net-log``:
every request that reached the network stack). A screenshot, read with Pillow, shows the page painted. Control pages
show that each channel does report: an error and a fetch the CSP blocks, and the same fetch in a page without it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image

from ppo.nightly.page import external_urls, render_page
from tests.nightly.conftest import launch_stand_in, run_cli, synthetic_history, write_experiment

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (bash .ci/chromium-setup.sh installs Debian's package)"
)

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND", "--hide-scrollbars", "--virtual-time-budget=15000",
    "--enable-logging=stderr", "--v=0",
]
STATUS_BACKGROUNDS = {"PASS": (0xC8, 0xE6, 0xC9), "FAIL": (0xFF, 0xCD, 0xD2), "INFRA-FAIL": (0xE0, 0xE0, 0xE0)}
FETCH = "<script>fetch('ht' + 'tps:' + '//example.invalid/x').catch(function () {});</script>"


@dataclass
class Visit:
    stdout: str
    console: list[str]
    requests: list[str]


def chromium(page: Path, workdir: Path, *args: str) -> Visit:
    """Open ``page`` in a fresh profile under ``workdir``; what Chromium printed, logged and requested."""
    workdir.mkdir(parents=True, exist_ok=True)
    netlog = workdir / "netlog.json"
    done = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={workdir / 'profile'}", f"--log-net-log={netlog}", *args,
         page.resolve().as_uri()],
        capture_output=True, text=True, timeout=180, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return Visit(done.stdout, console, page_requests(netlog))


def page_requests(netlog: Path) -> list[str]:
    """The URLs of the requests the page made. Chromium's own (update checks, sign-in) are keyed to no site, the
    page's to its ``file://`` site."""
    log = json.loads(netlog.read_text())
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return [
        event["params"]["url"] for event in log["events"]
        if event["type"] == start_job and event["params"].get("network_isolation_key", "").startswith("file://")
    ]


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("chromium")
    history = root / "history"
    synthetic_history(history, root / "repo")
    run_dir = launch_stand_in(root / "runs" / "tiny_cpu-recorded", "seed=11")
    experiment = write_experiment(root / "tiny_cpu.py")
    recorded = run_cli("nightly.py", "record", run_dir, "--recipe", "tiny_cpu", "--night", "2025-06-05",
                       "--history", history, "--experiment", experiment)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    out = root / "dashboard.html"
    built = run_cli("dashboard.py", history, "--out", out, "--repo", root / "repo")
    assert built.returncode == 0, built.stderr
    return {"root": root, "page": out, "html": out.read_text()}


@pytest.mark.slow
def test_every_plot_renders_without_errors_or_requests(dashboard):
    visit = chromium(dashboard["page"], dashboard["root"] / "dom", "--dump-dom")
    expected = dashboard["html"].count('<div class="plot" data-plot=')
    assert expected >= 5
    assert visit.stdout.count('class="plotly-graph-div js-plotly-plot"') == expected
    assert visit.stdout.count('class="main-svg"') >= 2 * expected
    assert len(re.findall(r'<path class="js-line"', visit.stdout)) >= expected
    assert visit.console == [] and visit.requests == []
    assert "2025-06-05" in visit.stdout and "tiny_cpu" in visit.stdout


@pytest.mark.slow
def test_the_screenshot_shows_the_matrix_and_plots(dashboard):
    shot = dashboard["root"] / "dashboard.png"
    visit = chromium(dashboard["page"], dashboard["root"] / "shot", f"--screenshot={shot}", "--window-size=1400,2000")
    with Image.open(shot) as image:
        assert image.size == (1400, 2000)
        colours = {rgb for _, rgb in image.convert("RGB").getcolors(maxcolors=1400 * 2000)}
    assert len(colours) > 200, f"only {len(colours)} colours: a blank or unstyled page"
    for status, rgb in STATUS_BACKGROUNDS.items():
        assert rgb in colours, f"no {status} cell colour {rgb} in the screenshot"
    assert visit.console == [] and visit.requests == []


@pytest.mark.slow
def test_the_page_holds_no_url_outside_plotly_js(dashboard):
    assert external_urls(dashboard["html"]) == []


@pytest.mark.slow
def test_the_error_channels_do_report(tmp_path):
    """Control pages: an uncaught error and a fetch that the CSP must block; the same fetch without the CSP."""
    guarded = tmp_path / "guarded.html"
    guarded.write_text(render_page("control", "<script>undefined_function_for_the_test();</script>" + FETCH))
    visit = chromium(guarded, tmp_path / "guarded")
    assert any("undefined_function_for_the_test" in line for line in visit.console), visit.console
    assert any("Content Security Policy" in line and "connect-src" in line for line in visit.console), visit.console
    assert visit.requests == []
    open_page = tmp_path / "open.html"
    open_page.write_text(f"<!DOCTYPE html><html><body>{FETCH}</body></html>")
    assert chromium(open_page, tmp_path / "open").requests == ["https://example.invalid/x"]
