"""What a search remembers from earlier ones, with real searches (local Ray, the real engine):

- a second search on the same machine reuses the first one's speed probes (no probe runs for a
  config the first probed) and, with ``--warm-start``, starts its study with the first one's
  trials, values and constraints; its start-up design is covered, so its first trial is the
  sampler's;
- ``--fresh-probes`` probes again (and replaces what the machine cache held).

Three tiny searches in one machine-cache folder, on one local Ray the module starts first, as a
notebook's ``ray.init()`` would: each search runs on it and leaves it running. A version change
missing the machine cache and two concurrent writers are tested without Ray in
``test_machine_cache.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
import ray

from tuner.commands import main
from tuner.errors import TunerError
from tuner.search_result import SearchResult
from tuner.spaces import get_space
from tuner.speed.machine_cache import MachineCache, this_machine
from tuner.tune import SearchDriver, SearchOptions, cluster
from tuner.tune.plan import check_space, make_plan
from tuner.tune.warm_start import WARM_START_ATTR, load_warm_start

pytestmark = pytest.mark.slow

SPACE = Path(__file__).parent / "spaces" / "resume_space.py"  # batch_size 8 | 16, base_lr
# The probes unbounded (--probe-share off): what is remembered must not depend on the clock.
QUIET = dict(
    remeasure_top=0, effects_repeats=0, early_stopping=False, speed_repeats=1, probe_steps=2,
    probe_share=None, no_report=True,
)  # fmt: skip


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("remembered")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TUNER_CACHE_DIR", str(folder / "cache"))
        yield folder


@pytest.fixture(scope="module")
def ray_here(root: Path) -> Iterator[cluster.ClusterInfo]:
    """One local Ray for the module's searches (started after ``root`` set the cache folder, which
    its workers inherit), stopped after them."""
    info = cluster.connect()
    yield info
    cluster.shutdown()


def _search(root: Path, name: str, **options: Any) -> SearchResult:
    storage = str(root / "experiments")
    options_ = SearchOptions(space=str(SPACE), name=name, storage=storage, **QUIET, **options)
    return SearchDriver(options_).run()


@pytest.fixture(scope="module")
def first(root: Path, ray_here: cluster.ClusterInfo) -> SearchResult:
    return _search(root, "first", num_samples=2)  # the design's two rows: batch 8 and 16


@pytest.fixture(scope="module")
def second(root: Path, first: SearchResult) -> SearchResult:
    return _search(root, "second", num_samples=1, warm_start="first")


def _study(outcome: SearchResult) -> optuna.Study:
    url = f"sqlite:///{outcome.experiment_dir / 'study.db'}"
    return optuna.load_study(study_name=outcome.experiment_dir.name, storage=url)


def _metadata(outcome: SearchResult) -> dict[str, Any]:
    return json.loads((outcome.experiment_dir / "tuner_experiment.json").read_text())


def test_the_first_search_probes_and_the_machine_remembers(first: SearchResult) -> None:
    assert first.state == "finished" and len(first.experiment.trials) == 2
    sources = sorted(first.experiment.trials["speed_source"])
    # batch 8 and 16 share their verdicts: the shared knobs' (per model, data, device and
    # precision) and channels_last's (per norm layer): the second trial probes nothing.
    assert sources == ["cache", "probed"]
    cache = MachineCache(this_machine())
    assert len(cache.entries()) == 2  # the shared verdict and channels_last's
    assert {e.experiment for e in cache.entries().values()} == {"first"}


def test_each_search_runs_on_the_ray_already_here_and_leaves_it_running(
    ray_here: cluster.ClusterInfo, first: SearchResult, second: SearchResult
) -> None:
    assert ray.is_initialized() and ray.get_runtime_context().gcs_address == ray_here.address
    for outcome in (first, second):
        recorded = _metadata(outcome)["cluster"]
        assert recorded["address"] == ray_here.address and recorded["is_local"] is False


def test_a_second_search_reuses_the_probes_without_probing(second: SearchResult) -> None:
    assert second.state == "finished" and len(second.experiment.trials) == 1
    metrics = second.experiment.trials.iloc[0]
    assert metrics["speed_source"] == "machine cache"  # the first search probed both verdicts
    assert metrics["speed_probe_time_s"] == 0.0 and metrics["speed_cache_age_s"] > 0
    machine = _metadata(second)["probe_cache"]["machine_cache"]
    assert machine["reused"] == 2 and machine["written"] == 0  # shared, and channels_last's


def test_warm_start_gives_the_study_the_earlier_trials(
    first: SearchResult, second: SearchResult
) -> None:
    earlier = {t.number: t for t in _study(first).trials}
    trials = _study(second).trials
    warm = [t for t in trials if WARM_START_ATTR in t.user_attrs]
    assert len(warm) == 2 and {t.user_attrs[WARM_START_ATTR] for t in warm} == {"first"}
    for trial in warm:
        source = earlier[int(trial.user_attrs["warm_start_trial"].split("#")[1])]
        assert trial.state == source.state == optuna.trial.TrialState.COMPLETE
        assert trial.values == source.values and trial.params == source.params
        assert trial.system_attrs["constraints"] == source.system_attrs["constraints"]
        assert trial.constraints == source.constraints
    info = _metadata(second)["warm_start"]
    assert info["trials"] == 2 and info["from"] == {"first": 2} and info["left_out"] == {}
    assert info["summary"] == "warm start: 2 earlier trials (2 from first)"


def test_the_covered_design_leaves_the_first_new_trial_to_the_sampler(
    first: SearchResult, second: SearchResult
) -> None:
    assert len(_metadata(first)["startup_design"]) == 2
    meta = _metadata(second)
    # A budget of one trial plans one design row; the earlier trials cover it.
    assert meta["startup_design"] == [] and meta["warm_start"]["design_rows_covered"] == 1
    new = [t for t in _study(second).trials if WARM_START_ATTR not in t.user_attrs]
    assert len(new) == 1
    assert "fixed_params" not in new[0].system_attrs  # not enqueued: the sampler chose it
    assert new[0].user_attrs["ray_trial_id"] == second.experiment.trials["trial_id"].iloc[0]


def test_fresh_probes_probe_again(root: Path, second: SearchResult) -> None:
    storage = str(root / "experiments")
    argv = [
        "search",
        str(SPACE),
        "--name",
        "third",
        "--storage",
        storage,
        "--num-samples",
        "1",
        "--fresh-probes",
        "--no-report",
        "--remeasure-top",
        "0",
        "--effects-repeats",
        "0",
        "--no-early-stopping",
        "--speed-repeats",
        "1",
        "--probe-steps",
        "2",
    ]
    assert main(argv) == 0
    (result,) = (root / "experiments" / "third").glob("*/result.json")
    last = json.loads(result.read_text().splitlines()[-1])
    assert last["speed_source"] == "probed" and last["speed_probe_time_s"] > 0
    remembered = {e.experiment for e in MachineCache(this_machine()).entries().values()}
    assert "third" in remembered  # its probe replaced the first search's


def test_warm_start_refuses_another_space_in_one_line(first: SearchResult) -> None:
    options = SearchOptions(
        space=str(SPACE), storage=str(first.experiment_dir.parent), warm_start="first"
    )
    space = get_space(str(SPACE))
    plan = make_plan(options, space, node_cpus=[2.0], total_gpus=0.0)
    with pytest.raises(TunerError) as error:
        load_warm_start(options, plan, check_space(space, plan), space_name="vit_space")
    message = str(error.value)
    assert "'resume_space'" in message and "'vit_space'" in message and "\n" not in message
