"""The start-up design covers every level of each categorical training knob, from the start."""

from __future__ import annotations

import itertools
import json

import pytest

from tuner.spaces import get_space, list_spaces, train_config_of
from tuner.tune import SearchOptions
from tuner.tune.design import startup_design
from tuner.tune.plan import SpaceProfile, check_space, make_plan


@pytest.mark.parametrize("cuda", [False, True])
@pytest.mark.parametrize("name", [s.name for s in list_spaces()])
def test_every_unconditional_level_of_every_space_is_in_the_design(name: str, cuda: bool) -> None:
    space = get_space(name)
    plan = make_plan(
        SearchOptions(space=name), space, node_cpus=[8.0], total_gpus=1.0 if cuda else 0.0
    )
    profile = check_space(space, plan)
    design = startup_design(profile, budget=None)
    for param, choices in profile.categoricals.items():
        if param in profile.conditional or len(choices) < 2:
            continue
        assert {row[param] for row in design} == set(choices), param
    for row in design:  # every row builds
        train_config_of(space.sample(_Fixed(row), cuda=cuda), workload=plan.workload)


class _Fixed:
    """A stand-in trial that returns the design's value where it has one."""

    def __init__(self, row: dict) -> None:
        self.row = row

    def suggest_categorical(self, name: str, choices: list) -> object:
        return self.row.get(name, choices[0])

    def suggest_float(self, name: str, low: float, high: float, log: bool = False) -> float:
        return low

    def suggest_int(self, name: str, low: int, high: int, **_: object) -> int:
        return low


def test_two_level_knobs_stay_orthogonal_when_the_rows_allow() -> None:
    profile = SpaceProfile(
        search_only=[],
        categoricals={
            "batch_size": [32, 64, 128, 256],
            "norm": ["batch", "group"],
            "amp": ["off", "bf16"],
            "gn_groups": [1, 4, 16, 32],
        },
        conditional={"gn_groups"},
        returned=set(),
    )
    design = startup_design(profile, budget=None)
    assert sorted(r["batch_size"] for r in design) == [32, 64, 128, 256]
    pairs = {(r["norm"], r["amp"]) for r in design}
    assert pairs == set(itertools.product(["batch", "group"], ["off", "bf16"]))
    assert {r["gn_groups"] for r in design} == {1, 4, 16, 32}


def test_the_seed_shuffles_which_levels_meet() -> None:
    profile = SpaceProfile([], {"lr": [1, 2, 3], "norm": ["a", "b"]}, set(), set())
    designs = {json.dumps(startup_design(profile, budget=None, seed=s)) for s in range(8)}
    assert len(designs) > 1
    assert startup_design(profile, budget=None, seed=3) == startup_design(
        profile, budget=None, seed=3
    )


def test_a_budget_smaller_than_the_design_truncates_it() -> None:
    profile = SpaceProfile([], {"batch_size": [1, 2, 3, 4], "norm": ["a", "b"]}, set(), set())
    assert len(startup_design(profile, budget=2)) == 2
    assert startup_design(SpaceProfile([], {"x": [1]}, set(), set()), budget=None) == []
