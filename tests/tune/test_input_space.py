"""``tuner search input_space`` end to end (the long tier): the shipped JPEG files, the loader
knobs probed like the others, the trials' input-pipeline figures in ``trials.csv``, and the
report's "Input pipeline" section. One real search (real Ray, Optuna, files), shortened.

Its fast siblings: tests/engine/test_input_pipeline.py (the files, decoders, host thread, the
loader measured alone), tests/compare/test_speed.py (what is probed on top of what),
tests/report/test_input_section.py (the section's sentences) and the smoke experiment's
trials.csv columns (tests/experiment/test_load.py).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from search_cli import search_command

from tuner.engine.result import bound_of
from tuner.experiment import read_trials_csv

# Not a whole-machine test: nothing it asserts rests on a measured speed (the loader levels
# follow the trial's 2 CPUs, not the load), so it runs beside the worker-group tests.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    root = tmp_path_factory.mktemp("input")
    # No re-measurement and no technique effects: nothing here reads them (the report's input
    # section is built from the trials), and the effects alone took 43 s of the search's 133.
    # 2,880 images (60 steps of 48, the mean batch): one evaluation, at the end.
    flags = ["--num-samples", "2", "--set", "images=2880", "--seed", "1", "--reports-dir",
             str(root / "reports"), "--remeasure-top", "0", "--effects-repeats", "0"]  # fmt: skip
    command = search_command("input_space", *flags, name="input", storage=root / "experiments")
    done = subprocess.run(command, capture_output=True, text=True, timeout=800)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    return root / "experiments" / "input", root / "reports" / "input", out


def test_the_loader_knobs_are_probed_on_the_jpeg_files(searched) -> None:
    experiment, _, out = searched
    assert "test_resnet on jpeg_digits @ 64px" in out
    cache = json.loads((experiment / "probe_cache.json").read_text())
    # The loader's knobs are in the shared verdicts (channels_last's own are per norm layer).
    shared = [c for key, c in cache.items() if json.loads(key)["scope"] == "shared"]
    assert shared
    for choice in shared:
        probed = {row["field"] for row in choice["variants"]}
        # image files: the decoder too; workers at the trial's levels; the host thread
        assert {"num_workers", "host_prefetch", "decoder"} <= probed
        workers = {row["name"] for row in choice["variants"] if row["field"] == "num_workers"}
        assert workers == {"num_workers=1", "num_workers=2"}  # 2 CPUs per trial
        if "num_workers" in choice["settings"]:  # kept: its prefetch factor probed on it
            assert "prefetch_factor" in probed


def test_every_trial_says_what_bound_it_and_what_its_loader_delivered(searched) -> None:
    _, reports, _ = searched
    trials = read_trials_csv(reports / "trials.csv")
    ok = trials[trials["kind"] == "ok"]
    assert not ok.empty
    for _, row in ok.iterrows():
        assert row["bound"] == bound_of(row["data_wait_fraction"])
        assert row["loader_images_per_second"] > 0
        assert row["effective_decoder"] in ("pil", "decode_jpeg")


def test_the_report_has_the_input_pipeline_section(searched) -> None:
    _, reports, _ = searched
    text = (reports / "report.md").read_text()
    section = text[text.index("Input pipeline") :]
    section = section[: section.index("\n## ")]
    assert re.search(r"\*\*(data|compute)-bound\*\*", section)
    assert "its train loader alone" in section and "It ran with " in section
    assert "num_workers=" in section and "decoder=" in section
    # what would help, from the measured wait: one of the two sentences, never neither
    limits = ("**The model, not the loader, is the limit", "**The input pipeline is the limit")
    assert sum(limit in section for limit in limits) == 1
