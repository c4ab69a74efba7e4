"""The report in a real browser: headless Chromium renders report.html from disk.

Chromium comes from the distribution's packages (``.ci/run`` installs it when missing). Outside
CI a machine without it skips this test; in CI (``CI`` set) a missing browser is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tuner.answer import decide
from tuner.experiment import load_experiment
from tuner.report import write_report

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

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.events.append((tag, attributes.get("id") or attributes.get("class") or ""))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.fixture(scope="module")
def page(smoke_experiment: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return (
        write_report(smoke_experiment, out_dir=tmp_path_factory.mktemp("browser")) / "report.html"
    )


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
