"""The report's technique-effects and parameter-importance plots drawn from their tables: real
PNG files holding what the tables say, and no plot where there is nothing to draw. (The report
tests draw them from real experiments, whose short searches rarely have importances or enough
effect rounds for a ratio.)"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from PIL import Image as PILImage

from tuner.report._plots import _KIND_STYLE, effects_plot, importance_plot, pareto_plot
from tuner.report.document import Section


def _png_size(path: Path) -> tuple[int, int]:
    with PILImage.open(path) as png:
        assert png.format == "PNG"
        return png.size


def test_each_arm_is_drawn_at_its_ratio_and_an_arm_without_one_is_left_out(
    tmp_path: Path,
) -> None:
    summary = pd.DataFrame(
        {
            "arm": ["channels_last off", "fused_adamw off", "compile on"],
            "throughput_ratio_vs_reference": [0.82, 1.01, math.nan],
            "throughput_ratio_vs_reference_low": [0.78, 0.95, math.nan],
            "throughput_ratio_vs_reference_high": [0.86, 1.07, math.nan],
            "throughput_ratio_vs_reference_tie": [False, True, False],
        }
    )
    image = effects_plot(summary, tmp_path / "effects.png")
    assert image is not None and _png_size(image.path)[1] > 0
    assert [(p["y"], p["x"]) for p in image.points] == [
        ("channels_last off", 0.82),
        ("fused_adamw off", 1.01),
    ]
    assert image.title == "One change at a time, interleaved, paired"
    unmeasured = summary.assign(throughput_ratio_vs_reference=math.nan)
    assert effects_plot(unmeasured, tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()


def test_one_bar_chart_per_objective_that_has_importances(tmp_path: Path) -> None:
    importances = {
        "images_per_second": {"batch_size": 0.7, "lr": 0.3},
        "val_accuracy": {"lr": 0.9, "batch_size": 0.1},
        "peak_memory_bytes": "too few trials",  # a reason, not a chart
    }
    image = importance_plot(importances, tmp_path / "importance.png")
    assert image is not None
    width, height = _png_size(image.path)
    assert width > height  # two charts side by side
    drawn = {(p["series"], p["y"]): p["x"] for p in image.points}
    assert drawn == {
        ("images_per_second", "batch_size"): 0.7,
        ("images_per_second", "lr"): 0.3,
        ("val_accuracy", "lr"): 0.9,
        ("val_accuracy", "batch_size"): 0.1,
    }
    assert image.title == "images_per_second / val_accuracy"
    assert importance_plot({"val_accuracy": "too few trials"}, tmp_path / "x.png") is None


def _every_kind_trials() -> pd.DataFrame:
    """Seven trials as the every-kind search makes them: three never measured anything."""
    nan = math.nan
    return pd.DataFrame(
        {
            "trial_id": ["ok", "weak", "over", "blowup", "bad", "crash", "cut"],
            "kind": [
                "ok",
                "stopped early",
                "over budget",
                "diverged",
                "errored",
                "errored",
                "incomplete",
            ],
            "images_per_second": [900.0, 120.0, 800.0, nan, nan, nan, 1500.0],
            "val_accuracy": [0.8, 0.1, 0.7, nan, nan, nan, nan],
        }
    )


def test_the_pareto_plot_stacks_no_trial_and_its_title_counts_its_marks(tmp_path: Path) -> None:
    """Issue 39: errored, diverged and unreported trials were stacked at (0, 0) under a title
    promising every trial, and both failure kinds shared one glyph and colour."""
    from tuner.report._audit_clients import check_plots
    from tuner.report.document import render_html

    trials = _every_kind_trials()
    objectives = [("images_per_second", "max"), ("val_accuracy", "max")]
    image = pareto_plot(trials, trials.iloc[:1], objectives, tmp_path / "pareto.png")
    drawn = [p for p in image.points if p["series"] != "Pareto front"]
    places = [(p["x"], p["y"]) for p in drawn]
    assert len(places) == len(set(places)) == 4  # the three that measured nothing: not drawn
    assert "(4 of 7)" in image.title and "1 diverged" in image.title and "2 errored" in image.title
    styles = {(p["marker"], p["color"]) for p in drawn}
    assert len(styles) == len({p["series"] for p in drawn})  # a glyph and colour per kind
    _, marker, color = _KIND_STYLE["diverged"]
    assert (marker, color) != _KIND_STYLE["errored"][1:]
    page = render_html("t", [Section("s", [image])])
    assert check_plots(page, "report.html", trials) == []


def test_the_pareto_plot_marks_which_figure_each_point_is(tmp_path: Path) -> None:
    """Issue 48: ok trials were drawn at their re-measured images/s and starved or stopped ones
    at their in-search figure with no mark, so the starved looked 5-10x slower than they ran,
    and one not re-measured drawn right of the front looked non-dominated."""
    trials = _every_kind_trials().assign(
        throughput_source=["re-measured", "search", "search", "search", "search", "search",
                           "search"],
    )  # fmt: skip
    objectives = [("images_per_second", "max"), ("val_accuracy", "max")]
    image = pareto_plot(trials, trials.iloc[:1], objectives, tmp_path / "pareto.png")
    figures = {
        p["trial_id"]: p.get("figure") for p in image.points if p["series"] != "Pareto front"
    }
    assert figures == {"ok": "re-measured", "weak": "search", "over": "search", "cut": "search"}
    assert "filled: images/s re-measured alone" in image.legend
    assert "hollow: images/s in the search (not re-measured)" in image.legend
    alike = pareto_plot(trials.drop(columns="throughput_source"), trials.iloc[:1], objectives,
                        tmp_path / "one.png")  # fmt: skip
    assert not any(label.startswith(("filled", "hollow")) for label in alike.legend)


def test_a_tie_and_an_interval_that_says_nothing_are_drawn_apart(tmp_path: Path) -> None:
    """Issue 48: effects.png coloured a tie and a "says nothing" alike (grey), and cut off its
    axis label."""
    from tuner.report import _plots

    summary = pd.DataFrame(
        {
            "arm": ["tie", "nothing", "faster"],
            "throughput_ratio_vs_reference": [1.01, 1.3, 1.2],
            "throughput_ratio_vs_reference_low": [0.98, 0.2, 1.1],
            "throughput_ratio_vs_reference_high": [1.04, 8.0, 1.3],
            "throughput_ratio_vs_reference_n": [6, 2, 6],
        }
    )
    image = effects_plot(summary, tmp_path / "effects.png")
    assert image is not None
    looks = {p["y"]: p["look"] for p in image.points}
    assert looks == {"tie": "a tie (within noise)", "nothing": "interval says nothing",
                     "faster": "faster, beyond noise"}  # fmt: skip
    assert _plots._EFFECT_STYLE["tie"][1:] != _plots._EFFECT_STYLE["uninformative"][1:]
