"""analysis/dashboard.py: the page's content, its figures' data, and the offline audit (no browser needed)."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser

import pytest

from ppo.nightly.page import CSP, PageAuditError, external_urls, render_page, text
from tests.nightly.conftest import run_cli, synthetic_history
from tests.nightly.stand_in import CHECKS


class _Cells(HTMLParser):
    """The matrix as {recipe: [(css class, text)]} and every src/href attribute of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[tuple[str, str]]] = {}
        self.links: list[str] = []
        self._in_matrix = self._in_row_head = False
        self._row: str | None = None
        self._cell: list | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.links += [v for k, v in attrs.items() if k in ("src", "href", "action", "srcset", "poster") and v]
        if tag == "table" and "matrix" in (attrs.get("class") or ""):
            self._in_matrix = True
        elif self._in_matrix and tag == "th":
            self._in_row_head = True
        elif self._in_matrix and tag == "td":
            self._cell = [attrs.get("class", ""), ""]

    def handle_endtag(self, tag):
        if tag == "table":
            self._in_matrix = False
        elif tag == "th":
            self._in_row_head = False
        elif tag == "td" and self._cell is not None:
            self.rows.setdefault(self._row, []).append((self._cell[0], self._cell[1]))
            self._cell = None

    def handle_data(self, data):
        if self._in_row_head:
            self._row = data
        elif self._cell is not None:
            self._cell[1] += data


def plots(page: str) -> dict[str, dict]:
    """Each figure's data and layout, read back from the ``Plotly.newPlot(id, data, layout, config)`` call that
    ``plotly.io.to_html`` wrote."""
    decoder = json.JSONDecoder()
    figures = {}
    for call in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*', page):
        data, end = decoder.raw_decode(page, call.end())
        layout, _ = decoder.raw_decode(page, re.compile(r",\s*").match(page, end).end())
        figures[call.group(1)] = {"data": data, "layout": layout}
    return figures


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("dashboard")
    facts = synthetic_history(root / "history", root / "repo")
    (root / "history" / "nights" / "2025-06-04" / "broken.json").write_text("{")
    done = run_cli("dashboard.py", root / "history", "--out", root / "out" / "dashboard.html", "--repo", root / "repo")
    assert done.returncode == 0, done.stderr
    page = (root / "out" / "dashboard.html").read_text()
    cells = _Cells()
    cells.feed(page)
    return {"page": page, "cells": cells, "root": root, **facts}


@pytest.mark.slow
def test_matrix_colours_each_recipe_and_night(built):
    status = {recipe: [c.split()[-1] for c, _ in row] for recipe, row in built["cells"].rows.items()}
    assert status == {
        "dapo_8n": ["none", "INFRA-FAIL", "none", "INFRA-FAIL"],
        "gsm8k_1n": ["PASS", "INFRA-FAIL", "PASS", "PASS"],
        "tiny_cpu": ["PASS", "PASS", "FAIL", "FAIL"],
    }


def test_cells_show_failing_checks_values_and_infra_reasons(built):
    tiny = built["cells"].rows["tiny_cpu"]
    assert CHECKS[0] in tiny[2][1] and "= 0.41" in tiny[2][1] and "false: 0.41 >= 0.6" in tiny[2][1]
    assert CHECKS[1] not in tiny[2][1]
    assert "regression" in tiny[2][1] and "regression" not in tiny[3][1]
    assert "4 checks pass" in tiny[0][1] and built["commits"][0][:10] in tiny[0][1]
    dapo = built["cells"].rows["dapo_8n"]
    assert "policy.parallel.tp=3 does not divide 8 GPUs" in dapo[1][1]


def test_regression_shows_the_commits_in_between_and_the_config_diff(built):
    page = built["page"]
    section = page[page.index('id="regression-tiny_cpu-2025-06-03"'):]
    section = section[: section.index("<h3>Checked values")]
    listed = html.unescape(section.split("Commits in between (2):</p>\n<pre>")[1].split("</pre>")[0]).splitlines()
    commits = built["commits"]
    assert [line.split(" ", 1)[1] for line in listed] == ["change the default lr", "refactor the critic"]
    assert commits[2].startswith(listed[0].split()[0]) and commits[1].startswith(listed[1].split()[0])
    assert '<span class="del">-policy.optimizer.lr = 2e-05</span>' in section
    assert '<span class="add">+policy.optimizer.lr = 5e-05</span>' in section
    assert page.count('class="regression-mark" href="#regression-') == 1


def test_check_history_plots_values_per_night_with_thresholds(built):
    figure = plots(built["page"])["plot-tiny_cpu-checks"]
    first = figure["data"][0]
    assert first["x"] == built["nights"] and first["y"] == [0.75, 0.75, 0.41, 0.41]
    assert first["marker"]["color"] == ["#2e7d32", "#2e7d32", "#c62828", "#c62828"]
    lines = [(s["y0"], s["yref"]) for s in figure["layout"]["shapes"]]
    assert (0.6, "y") in lines and (0.0, "y2") in lines and (1.05, "y3") in lines
    assert (0.0, "y4") in lines and (6.0, "y5") in lines
    gsm = plots(built["page"])["plot-gsm8k_1n-checks"]["data"][0]
    assert gsm["y"][1] is None


def test_tonight_is_drawn_over_the_baseline_band(built):
    figure = plots(built["page"])["plot-tiny_cpu-curves"]
    names = [t.get("name") for t in figure["data"]]
    assert "baseline mean" in names and any(n and n.startswith("baseline min–max (3 seeds)") for n in names)
    assert sum(t.get("fill") == "tonexty" for t in figure["data"]) == 2 * 6
    tonight = [t for t in figure["data"] if t.get("name") == "2025-06-04"]
    latest = built["records"][3]
    assert tonight[0]["y"] == pytest.approx(list(latest.curves["train/reward"].values()))
    assert not any(t.get("fill") for t in plots(built["page"])["plot-gsm8k_1n-curves"]["data"])
    assert "no baseline band" in built["page"].split('id="recipe-gsm8k_1n"')[1].split("<h2")[0]


def test_the_page_reaches_nothing_outside_itself(built):
    page = built["page"]
    assert external_urls(page) == []
    assert all(link.startswith("#") for link in built["cells"].links), built["cells"].links
    assert "https://wandb.example" not in page
    assert "https://wandb.example/team/ppo/runs/abc123" in html.unescape(page)
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in page and "default-src 'none'" in CSP
    assert "<script src" not in page and "<link" not in page
    assert page.count('"displaylogo": false') == len(plots(page)) >= 5


def test_unreadable_records_are_listed(built):
    assert "broken.json" in built["page"].split('id="problems"')[1]


@pytest.mark.slow
def test_window_and_empty_history(tmp_path, built):
    out = tmp_path / "d.html"
    assert run_cli("dashboard.py", built["root"] / "history", "--out", out, "--nights", 2).returncode == 0
    cells = _Cells()
    cells.feed(out.read_text())
    assert [len(row) for row in cells.rows.values()] == [2, 2, 2]
    (tmp_path / "empty").mkdir()
    assert run_cli("dashboard.py", tmp_path / "empty", "--out", out).returncode == 0
    assert "No night records yet" in out.read_text()
    done = run_cli("dashboard.py", tmp_path / "absent", "--out", out)
    assert done.returncode == 2 and "no such history directory" in done.stderr


def test_plotly_js_is_inlined_once_and_left_as_plotly_ships_it(built):
    from plotly.offline import get_plotlyjs

    assert built["page"].count(get_plotlyjs()) == 1
    assert len(re.findall(r"https?://", get_plotlyjs())) > 10


def test_audit_rules():
    assert external_urls('a="https://x.org/p" WSS://h/x ftp://h/y') == ["https://x.org/p", "WSS://h/x", "ftp://h/y"]
    assert text("see https://a.b/c <x>") == "see https:&#47;&#47;a.b/c &lt;x&gt;"
    assert external_urls(render_page("https://title.example", text("https://body.example"))) == []
    with pytest.raises(PageAuditError, match="https://cdn.example/x.js"):
        render_page("t", '<script src="https://cdn.example/x.js"></script>')


def test_a_regression_shows_the_samples_of_both_nights(tmp_path):
    """The passing and the failing night's last samples files (``<run_dir>/samples/step_N.jsonl``), and their first
    validation answers side by side; a night that kept none says so."""
    import dataclasses

    from ppo.metrics.samples import write_samples
    from ppo.nightly.report import _samples, last_samples
    from tests.nightly.conftest import record

    def night(day: str, status: str, run_dir: str):
        return dataclasses.replace(record("tiny_cpu", day, status, commit="c", config=""), run_dir=run_dir)

    good = night("2025-06-01", "PASS", str(tmp_path / "good"))
    bad = night("2025-06-02", "FAIL", str(tmp_path / "bad"))
    answer = {"split": "validation", "mode": "greedy", "prompt": "12+30=", "ground_truth": "42"}
    write_samples(tmp_path / "good", 10, [answer | {"response": "42", "answer": "42", "reward": 1.0}])
    write_samples(tmp_path / "good", 20, [answer | {"response": "42<eos>", "answer": "42", "reward": 1.0}])
    write_samples(tmp_path / "bad", 20, [{"split": "train", "response": "x"},
                                         answer | {"response": "41", "answer": "41", "reward": 0.0}])
    assert last_samples(good) == tmp_path / "good" / "samples" / "step_20.jsonl"
    section = _samples(good, bad)
    assert f"passing <code>{tmp_path / 'good' / 'samples' / 'step_20.jsonl'}</code>" in section
    assert f"failing <code>{tmp_path / 'bad' / 'samples' / 'step_20.jsonl'}</code>" in section
    assert "<td>passing</td><td>12+30=</td><td><pre>42&lt;eos&gt;</pre></td>" in section
    assert "<td>failing</td><td>12+30=</td><td><pre>41</pre></td><td>41 / 42</td><td>0.0</td>" in section
    assert "<td>failing</td><td></td><td><pre>x</pre>" not in section  # training samples are not shown
    nothing = _samples(night("2025-06-01", "PASS", str(tmp_path / "none")), bad)
    assert "passing <code>— (no samples kept)</code>" in nothing
