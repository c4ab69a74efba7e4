"""Which earlier trials a warm start takes, and how, from an experiment folder made here (no Ray:
a real Optuna study and metadata file). The searches themselves: ``test_remembered.py``."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from tuner.errors import TunerError
from tuner.experiment.options import SearchOptions
from tuner.experiment.paths import ExperimentPaths
from tuner.spaces import get_space
from tuner.tune.context import SearchContext
from tuner.tune.plan import check_space, make_plan
from tuner.tune.searcher import constraint_arguments
from tuner.tune.warm_start import WARM_START_ATTR, WarmStart, load_warm_start, warm_start

SPACE = Path(__file__).parent / "spaces" / "resume_space.py"  # batch_size 8 | 16, base_lr
OLD_BUDGET, NEW_BUDGET = 1000, 2000
pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")


def _trial(state: TrialState, batch: int, *, peak: int = 500, **extra: object) -> object:
    old = {
        "batch_size": CategoricalDistribution([8, 16, 32]),
        "base_lr": FloatDistribution(1e-4, 1e-2, log=True),
    }
    violation = (peak - OLD_BUDGET) / OLD_BUDGET
    attrs = {
        "status": "ok",
        "peak_memory_bytes": peak,
        "images_per_second": 100.0 + batch,
        "val_accuracy": 0.5,
        "memory_violation": violation,
        "ray_trial_id": f"r{batch}",
    }
    complete = state == TrialState.COMPLETE
    return create_trial(
        state=state,
        values=[100.0 + batch, 0.5] if complete else None,
        params={"batch_size": batch, "base_lr": 1e-3},
        distributions=old,
        user_attrs=attrs,
        **(constraint_arguments(violation) if complete else {}),
        **extra,  # type: ignore[arg-type]
    )


@pytest.fixture
def earlier(tmp_path: Path) -> Path:
    options = SearchOptions(space=str(SPACE))
    plan = make_plan(options, get_space(str(SPACE)), node_cpus=[2.0], total_gpus=0.0)
    folder = tmp_path / "old"
    folder.mkdir()
    meta = {
        "name": "old",
        "space": "resume_space",
        "workload": plan.workload,
        "max_memory_bytes": OLD_BUDGET,
    }
    (folder / "tuner_experiment.json").write_text(json.dumps(meta))
    study = optuna.create_study(
        storage=f"sqlite:///{folder / 'study.db'}",
        study_name="old",
        directions=["maximize", "maximize"],
    )
    study.set_metric_names(["images_per_second", "val_accuracy"])
    study.add_trials(
        [
            _trial(TrialState.COMPLETE, 8),  # taken
            _trial(TrialState.COMPLETE, 32),  # a batch size the space no longer has
            _trial(TrialState.FAIL, 16),
            _trial(TrialState.COMPLETE, 16, peak=1500),  # over the old budget, within the new one
            _trial(TrialState.PRUNED, 16, intermediate_values={1: 0.3}),  # taken
        ]
    )
    return folder


def _load(reference: str, **changes: object) -> WarmStart | None:
    options = SearchOptions(
        space=str(SPACE), warm_start=reference, max_memory_bytes=NEW_BUDGET, **changes
    )  # type: ignore[arg-type]
    space = get_space(str(SPACE))
    plan = make_plan(options, space, node_cpus=[2.0], total_gpus=0.0)
    return load_warm_start(options, plan, check_space(space, plan), space_name=space.name)


def test_finished_trials_this_space_can_produce_are_taken(earlier: Path) -> None:
    warm = _load(str(earlier))
    assert warm is not None and warm.source == "old"
    assert [(t.state, t.params["batch_size"]) for t in warm.trials] == [
        (TrialState.COMPLETE, 8),
        (TrialState.PRUNED, 16),
    ]
    assert warm.left_out == {
        "outside the current space": 1,
        "failed or unfinished": 1,
        "over the earlier memory budget, never measured under this one": 1,
    }
    done, pruned = warm.trials
    assert done.values == [108.0, 0.5] and pruned.intermediate_values == {1: 0.3}
    assert done.user_attrs[WARM_START_ATTR] == "old" and "ray_trial_id" not in done.user_attrs
    # The constraint follows the new budget: (500 - 2000) / 2000, where every sampler reads it.
    assert (
        done.system_attrs["constraints"] == [-0.75] and done.user_attrs["memory_violation"] == -0.75
    )
    assert done.distributions["batch_size"] == CategoricalDistribution([8, 16])  # this space's
    assert warm.summary().startswith("warm start: 2 earlier trials (2 from old); 1 left out: ")


def test_the_design_rows_the_trials_cover_are_skipped(earlier: Path) -> None:
    warm = _load(str(earlier))
    assert warm is not None
    design = [{"batch_size": 16}, {"batch_size": 8}, {"batch_size": 16, "gn_groups": 4}]
    assert warm.uncovered(design) == []  # gn_groups: a parameter these trials do not have
    partial = WarmStart("old", earlier, warm.trials[:1])
    assert partial.uncovered(design) == [{"batch_size": 16}, {"batch_size": 16, "gn_groups": 4}]


def test_another_workload_or_no_such_experiment_is_refused_in_one_line(earlier: Path) -> None:
    with pytest.raises(TunerError, match=r"its workload differs \(images 240 -> 480\)"):
        _load(str(earlier), overrides={"images": 480})
    with pytest.raises(TunerError, match="No experiment") as error:
        _load(str(earlier.parent / "missing"))
    assert "\n" not in str(error.value)


def test_without_the_flag_nothing_is_read() -> None:
    assert _load("") is None


def test_a_grid_search_says_it_runs_the_warm_started_points_again(
    earlier: Path, tmp_path: Path
) -> None:
    options = SearchOptions(space=str(SPACE), warm_start=str(earlier), sampler="grid")
    space = get_space(str(SPACE))
    plan = make_plan(options, space, node_cpus=[2.0], total_gpus=0.0)
    paths = ExperimentPaths.of(str(tmp_path / "experiments"), "new")
    search = SearchContext(options, space, plan, paths)
    _, meta = warm_start(search, check_space(space, plan), design=[])
    assert meta is not None and "--sampler grid still runs its whole grid" in meta["summary"]
