"""Resources and workload decided before a search starts (no cluster needed)."""

from __future__ import annotations

import pytest

from tuner.errors import TunerError
from tuner.spaces import get_space
from tuner.tune import SearchOptions
from tuner.tune.plan import check_space, make_plan

VIT = get_space("vit_space")


def _plan(node_cpus: list[float], gpus: float, **options):
    return make_plan(
        SearchOptions(space="vit_space", **options), VIT, node_cpus=node_cpus, total_gpus=gpus
    )


def test_gpu_machine_gets_one_whole_gpu_per_trial_and_the_gpu_workload() -> None:
    plan = _plan([16.0], 4.0)
    assert plan.gpus_per_trial == 1 and plan.concurrency == 4 and not plan.gpus_shared
    assert plan.cpus_per_trial == 4 and plan.torch_threads == 4
    assert plan.cuda and plan.workload_kind == "gpu"
    assert plan.workload["model"] == "vit_small_r26_s32_224"


def test_fractional_gpus_are_shared_only_when_asked() -> None:
    plan = _plan([16.0], 1.0, gpus_per_trial=0.5)
    assert plan.gpus_shared and plan.concurrency == 2


def test_cpu_machine_runs_one_trial_per_node_on_all_its_cores() -> None:
    plan = _plan([2.0], 0.0)
    assert (plan.concurrency, plan.cpus_per_trial, plan.gpus_per_trial) == (1, 2.0, 0.0)
    assert plan.torch_threads == 1  # one core left to the loader and Ray
    assert not plan.cuda and plan.workload_kind == "cpu" and plan.trial_device == "cpu"
    assert plan.num_samples == VIT.num_samples["cpu"]


def test_overrides_replace_workload_fields_and_bad_ones_fail_in_one_line() -> None:
    plan = _plan([2.0], 0.0, overrides={"img_size": 48, "steps": 7})
    assert plan.workload["img_size"] == 48 and plan.workload["steps"] == 7
    with pytest.raises(TunerError, match="Unknown run setting"):
        _plan([2.0], 0.0, overrides={"imgsize": 48})


def test_asking_for_gpus_the_cluster_lacks_is_one_clear_error() -> None:
    with pytest.raises(TunerError, match="has 0 GPU"):
        _plan([2.0], 0.0, gpus_per_trial=1)


def test_time_budget_alone_runs_until_it_ends() -> None:
    assert _plan([2.0], 0.0, search_time_budget_s=60).num_samples == -1


@pytest.mark.parametrize("cuda_gpus", [0.0, 1.0])
def test_check_space_builds_samples_for_the_planned_device(cuda_gpus: float) -> None:
    check_space(VIT, _plan([8.0], cuda_gpus))


def test_the_profile_shows_categoricals_conditionals_and_search_only_names() -> None:
    profile = check_space(VIT, _plan([8.0], 0.0))
    assert profile.search_only == ["base_lr"]
    assert profile.categoricals["norm"] == ["batch", "group"]
    assert profile.categoricals["amp"] == ["off", "bf16"]
    assert profile.conditional == {"gn_groups"}
    assert {"norm", "batch_size", "lr", "amp"} <= profile.returned


def test_set_on_a_sampled_parameter_pins_it_out_of_the_space() -> None:
    plan = _plan([8.0], 0.0, overrides={"batch_size": 24, "lr": 0.002, "norm": "group"})
    profile = check_space(VIT, plan)
    assert profile.pinned == ["batch_size", "lr", "norm"]
    assert "batch_size" not in profile.categoricals and "norm" not in profile.categoricals
    assert profile.values["batch_size"] == [24] and profile.values["lr"] == [0.002]
    assert profile.values["norm"] == ["group"]  # and its conditional gn_groups still sampled
    assert len(profile.values["gn_groups"]) > 1


def test_set_of_a_field_the_space_does_not_sample_pins_nothing() -> None:
    assert check_space(VIT, _plan([8.0], 0.0, overrides={"label_smoothing": 0.1})).pinned == []
