"""The report in a real browser: headless Chromium renders report.html from disk.

Chromium comes from the distribution's packages (``.ci/run`` installs it when missing). Outside
CI a machine without it skips this test; in CI (``CI`` set) a missing browser is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tuner.answer import decide
from tuner.experiment import load_experiment, read_trials_csv
from tuner.report import write_report
from tuner.report._plots import _IN_SEARCH, _REMEASURED

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium() -> str:
    found = next(
        (
            shutil.which(n)
            for n in ("chromium", "chromium-browser", "google-chrome")
            if shutil.which(n)
        ),
        None,
    )
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: .ci/run installs Debian's chromium package")
        pytest.skip("no Chromium here (apt-get install chromium to run this test)")
    return found


def _browse(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [_chromium(), *FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


class _Order(HTMLParser):
    """Where the answer section, the first folded block and each table sit in the DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str]] = []
        self.text: list[str] = []
        self.images: list[dict[str, str | None]] = []
        self.from_answer: list[str] = []  # the paragraphs from section 1 on, their text
        self._capture: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.events.append((tag, attributes.get("id") or attributes.get("class") or ""))
        if tag == "img":
            self.images.append(attributes)
        in_answer = ("section", "answer") in self.events
        if tag == "p" and in_answer and self._capture is None:
            self._capture = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "p" and self._capture is not None:
            self.from_answer.append("".join(self._capture))
            self._capture = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._capture is not None:
            self._capture.append(data)


@pytest.fixture(scope="module")
def page(smoke_experiment: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return (
        write_report(smoke_experiment, out_dir=tmp_path_factory.mktemp("browser")) / "report.html"
    )


def _rendered(page: Path, profile: Path) -> _Order:
    done = _browse(page, profile, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    dom = _Order()
    dom.feed(done.stdout)
    return dom


def test_the_rendered_page_leads_with_the_recommendation(
    page: Path, smoke_experiment: Path, tmp_path: Path
) -> None:
    done = _browse(page, tmp_path / "profile", "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    dom = _Order()
    dom.feed(done.stdout)
    events = dom.events
    answer = events.index(("section", "answer"))
    first_details = events.index(("details", ""))
    assert answer < first_details  # the recommendation before any metadata
    assert all(
        e != ("table", "") or events[i - 1] == ("div", "scroll")
        for i, e in enumerate(events)
        if e[0] == "table"
    )
    text = "".join(dom.text)
    recommended = decide(load_experiment(smoke_experiment)).recommended
    head = text[: text.index("2. Pareto front")]
    assert f"Train with it (trial {recommended['trial_id']})" in head
    assert re.search(r"throughput [\d,]+ \[[\d,]+–[\d,]+\] images/s", head)


def test_a_screenshot_of_the_first_screen(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "first-screen.png"
    done = _browse(page, tmp_path / "profile", "--window-size=1280,900", f"--screenshot={shot}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_the_answer_names_the_pick_then_states_the_rule(
    page: Path, smoke_experiment: Path, tmp_path: Path
) -> None:
    dom = _rendered(page, tmp_path / "profile")
    answer = decide(load_experiment(smoke_experiment))
    pick, paragraphs = answer.recommended, dom.from_answer
    if answer.noise_note():  # the smoke search re-measures 2 rounds: said before the pick
        assert paragraphs[0].startswith("Too noisy to decide on speed.")
        paragraphs = paragraphs[1:]
    assert paragraphs[0].startswith(f"Recommended: trial {pick['trial_id']}, by the rule")
    assert paragraphs[1].startswith("The rule: recommend the configuration that reaches")


# The legend's entries that name which figure a point is, not a series (pareto.png, issue 48).
FIGURE_KEYS = {_REMEASURED: "re-measured", _IN_SEARCH: "search"}


def _promised(title: str) -> int | None:
    found = re.search(r"\((\d+)\)|: (\d+) trials?\b", title)
    return int(next(g for g in found.groups() if g)) if found else None


def test_every_plot_draws_what_its_legend_and_title_promise(
    page: Path, smoke_experiment: Path, tmp_path: Path
) -> None:
    dom = _rendered(page, tmp_path / "profile")
    plots = {image["alt"]: image for image in dom.images}
    assert {"Pareto front with intervals", "throughput_vs_batch", "memory_vs_batch"} <= set(plots)
    trials = read_trials_csv(page.parent / "trials.csv")
    front = decide(load_experiment(smoke_experiment)).front
    for alt, image in plots.items():
        points = json.loads(image["data-points"] or "[]")
        legend = json.loads(image["data-legend"] or "[]")
        assert points, alt
        series = {p["series"] for p in points}
        if legend:  # every legend entry is drawn, and nothing is drawn unnamed
            keys = {k: v for k, v in FIGURE_KEYS.items() if k in legend}  # filled / hollow
            assert series == set(legend) - set(keys), alt
            assert set(keys.values()) <= {p.get("figure") for p in points}, alt
        counted = [p for p in points if p["series"] != "Pareto front"]
        promised = _promised(image["data-title"] or "")
        if promised is not None:
            assert len(counted) == promised, (alt, image["data-title"])
        assert all(np.isfinite([p["x"] for p in points if isinstance(p["x"], float)])), alt
    pareto = json.loads(plots["Pareto front with intervals"]["data-points"])
    drawn = sorted(p["trial_id"] for p in pareto if p["series"] != "Pareto front")
    assert drawn == sorted(trials["trial_id"].astype(str))  # every trial, failed ones too
    ringed = {p["trial_id"] for p in pareto if p["series"] == "Pareto front"}
    assert ringed == set(front["trial_id"].astype(str))
    by_kind = {p["trial_id"]: p["series"] for p in pareto if p["series"] != "Pareto front"}
    for _, row in trials.iterrows():  # each kind is its own series: not-ok never drawn as ok
        assert (by_kind[str(row["trial_id"])] == "ok") == (row["kind"] == "ok")
    measured = trials[
        pd.to_numeric(trials["images_per_second"], errors="coerce").notna()
        & trials["param_batch_size"].notna()
    ]
    speed = json.loads(plots["throughput_vs_batch"]["data-points"])
    assert sorted(p["trial_id"] for p in speed) == sorted(measured["trial_id"].astype(str))
    for point in speed:
        kind = measured.set_index(measured["trial_id"].astype(str)).at[point["trial_id"], "kind"]
        assert point["series"].startswith("ok") == (kind == "ok")  # over budget marked apart


def test_the_table_of_all_trials_sorts_in_the_browser(page: Path, tmp_path: Path) -> None:
    # Click "images/s in search" twice and dump the DOM: the rows come back in falling order.
    script = tmp_path / "sort.html"
    source = page.read_text()
    click = (
        "<script>window.addEventListener('load', () => {"
        "const th = [...document.querySelectorAll('table.sortable th')]"
        ".find(h => h.textContent === 'images/s in search'); th.click(); th.click();});</script>"
    )
    script.write_text(source.replace("</body>", click + "</body>"))
    done = _browse(script, tmp_path / "profile", "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    table = done.stdout.split("sortable", 1)[1].split("</table>", 1)[0]
    header = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*>(.*?)</th>", table, re.S)]
    column = header.index("images/s in search")
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in table.split("<tr")[2:]]
    shown = [float(r[column].replace(",", "")) for r in rows if r[column].strip()]
    assert len(rows) >= 3 and shown == sorted(shown, reverse=True)


@pytest.mark.slow  # the nothing-fits search is the long tier's (tests/tiers.py: FAST_CPU)
def test_over_budget_trials_are_drawn_marked_apart(
    infeasible_experiment: Path, tmp_path: Path
) -> None:
    page = write_report(infeasible_experiment, out_dir=tmp_path / "r") / "report.html"
    dom = _rendered(page, tmp_path / "profile")
    trials = read_trials_csv(page.parent / "trials.csv")
    plots = {image["alt"]: image for image in dom.images}
    pareto = json.loads(plots["Pareto front with intervals"]["data-points"])
    assert sorted(p["trial_id"] for p in pareto) == sorted(trials["trial_id"].astype(str))
    assert {p["series"] for p in pareto} == {"over budget"}
    assert set(json.loads(plots["Pareto front with intervals"]["data-legend"])) == {"over budget"}
    for alt in ("throughput_vs_batch", "memory_vs_batch"):
        if alt in plots:
            assert {p["series"] for p in json.loads(plots[alt]["data-points"])} == {"over budget"}
