"""Speed settings settled by probes: what is probed, what is kept, and the cache key."""

from __future__ import annotations

import json

from tuner.config import TrainConfig
from tuner.speed import RULE, SpeedChoice, choose_speed, combination, settle, speed_key
from tuner.speed.choose import variants
from tuner.techniques import knob, speed_knobs
from tuner.workloads import MICRO_VIT

TINY = TrainConfig(
    **MICRO_VIT,
    img_size=16, batch_size=16, epochs=None, steps=8, warmup_steps=1, device="cpu",
)  # fmt: skip


def test_every_unpinned_speed_knob_is_probed_and_pinned_ones_are_not() -> None:
    probed = {entry.field for entry, _ in variants(cuda=False, pinned=())}
    assert probed == {k.field for k in speed_knobs(cuda=False) if not k.after}
    assert "decoder" in probed and "decoder" not in {
        e.field for e, _ in variants(cuda=False, pinned=(), files=False)
    }  # the decoder only where the data is image files
    riding = variants(cuda=False, pinned=(), after="num_workers")
    assert [(e.field, v) for e, v in riding] == [("prefetch_factor", 4)]
    assert "compile" not in probed  # slow to build on a CPU
    assert "channels_last" not in {
        e.field for e, _ in variants(cuda=False, pinned={"channels_last"})
    }
    on_gpu = [(e.field, v) for e, v in variants(cuda=True, pinned=())]
    assert ("compile", "default") in on_gpu and ("compile", "max-autotune") not in on_gpu
    assert ("num_workers", 2) in on_gpu and ("prefetch", "cuda_stream") in on_gpu


def test_worker_levels_are_those_the_run_has_cores_for() -> None:
    workers = knob("num_workers")
    assert workers.runnable_values(cuda=True, cores=16) == (2, 4, 8)
    assert workers.runnable_values(cuda=True, cores=4) == (2, 4)
    assert workers.runnable_values(cuda=False, cores=2) == (1, 2)
    assert workers.runnable_values(cuda=False, cores=1) == (1,)
    assert workers.runnable_values(cuda=True, cores=1) == ()  # never more workers than CPUs
    assert knob("channels_last").runnable_values(cuda=False, cores=1) == (True,)


def test_a_real_choice_measures_every_variant_and_keeps_consistent_wins() -> None:
    choice = choose_speed(TINY, cuda=False, pinned={"num_workers"}, steps=2, repeats=2,
                          max_memory_bytes=None)  # fmt: skip
    names = [v["name"] for v in choice.variants]
    # digits: no image files, so no decoder; workers pinned: prefetch_factor probed on them
    assert names == ["set_to_none", "channels_last", "fused_adamw", "host_prefetch"]
    assert choice.repeats == 2 and choice.plain_images_per_second > 0
    assert 0 < choice.probe_step_seconds <= choice.probe_seconds
    for row in choice.variants:
        assert row["ratio"] > 0 and row["peak_memory_bytes"] > 0
        assert not row["clear"] or (row["low"] > 1 and row["ratio"] > 1)  # beyond the noise
        if row["kept"]:  # faster than plain on average (and in every pair): what runs
            assert row["ratio"] > 1 and row["changes"].items() <= choice.settings.items()
    assert SpeedChoice.from_dict(choice.to_dict()) == choice  # what the cache stores


def test_when_nothing_fits_each_knob_is_tried_once_for_memory() -> None:
    choice = choose_speed(TINY, cuda=False, pinned=(), steps=2, repeats=3, max_memory_bytes=10)
    assert choice.over_budget and choice.plain_over_budget and choice.settings == {}
    probed = variants(cuda=False, pinned=(), files=False)  # digits: no decoder
    assert len(choice.variants) == len(probed) and choice.repeats == 1
    assert choice.summary() == "nothing fits the memory budget"


def test_a_memory_saving_knob_can_make_an_over_budget_config_fit() -> None:
    plain = choose_speed(TINY, cuda=False, pinned=(), steps=2, repeats=2, max_memory_bytes=None)
    plain_peak = min(v["peak_memory_bytes"] for v in plain.variants if v["name"] == "fused_adamw")
    freed = next(v["peak_memory_bytes"] for v in plain.variants if v["name"] == "set_to_none")
    budget = (freed + plain_peak) / 2  # between the plain setting's peak and set_to_none's
    choice = choose_speed(TINY, cuda=False, pinned=(), steps=2, repeats=2, max_memory_bytes=budget)
    assert choice.plain_over_budget and not choice.over_budget
    assert choice.settings["set_to_none"] is True
    assert choice.summary().startswith("plain over the memory budget; set_to_none makes it fit")
    # The other knobs are then probed on top of set_to_none, as they would be on plain.
    on_top = [v for v in choice.variants if v["name"].endswith(" on set_to_none")]
    assert {v["field"] for v in on_top} == {
        "channels_last",
        "fused_adamw",
        "num_workers",
        "host_prefetch",
    }
    assert choice.repeats == 2 and all(v["ratio"] > 0 for v in on_top)
    for row in on_top:  # what the trial runs with: the fit knob and the kept ones on top
        assert row["kept"] == (row["changes"].items() <= choice.settings.items())


def test_the_combination_is_used_only_when_it_beats_the_best_knob_alone() -> None:
    rows = [
        {"name": "a", "field": "a", "changes": {"a": True}, "ratio": 1.3, "kept": True},
        {"name": "b", "field": "b", "changes": {"b": True}, "ratio": 1.1, "kept": True},
        {"name": "c", "field": "c", "changes": {"c": True}, "ratio": 0.9, "kept": False},
    ]
    assert combination(rows) == {"a": True, "b": True}
    assert settle([dict(r) for r in rows], 1.4) == {"a": True, "b": True}
    slower = [dict(r) for r in rows]
    assert settle(slower, 1.2) == {"a": True} and not slower[1]["kept"]
    assert settle([dict(r) for r in rows], None) == {"a": True}  # together it did not fit


def test_the_key_ignores_lr_but_not_batch_size_norm_or_pinned_knobs() -> None:
    key = speed_key(TINY, "cpu", ())
    assert speed_key(TINY.replace(lr=0.5, seed=3), "cpu", ()) == key
    assert speed_key(TINY.replace(batch_size=32), "cpu", ()) != key
    assert speed_key(TINY.replace(norm="group", gn_groups=4), "cpu", ()) != key
    assert speed_key(TINY.replace(gn_groups=4), "cpu", ()) == key  # unused without GroupNorm
    assert speed_key(TINY, "cpu", ("channels_last",)) != key
    assert json.loads(key)["rule"] == RULE  # a choice made by another decision rule is not reused
    assert speed_key(TINY, "other cpu", ()) != key
    # a trial's CPUs bound the loader workers it tries: a 2-CPU choice is no 1-CPU choice
    assert speed_key(TINY, "cpu", (), cores=1) != speed_key(TINY, "cpu", (), cores=2)


def test_the_summary_of_a_kept_knob_without_an_interval_says_so() -> None:
    # One valid pair (the other failed) gives a ratio but no interval; the line a trial reports
    # (also on its error path) must still be written.
    row = {"name": "set_to_none", "field": "set_to_none", "changes": {"set_to_none": True},
           "ratio": 1.2, "low": None, "high": None, "clear": False, "kept": True}  # fmt: skip
    choice = SpeedChoice(settings={"set_to_none": True}, variants=[row])
    assert choice.summary() == "set_to_none (1.20x, one measurement)"
    clear = {**row, "low": 1.05, "high": 1.3, "clear": True}
    assert SpeedChoice(settings={}, variants=[clear]).summary() == "set_to_none (1.20x [1.05–1.30])"


def test_prefetch_factor_is_probed_on_top_of_workers_that_are_on() -> None:
    workers = TINY.replace(num_workers=1, persistent_workers=True)  # pinned on by a space
    choice = choose_speed(workers, cuda=False, pinned={"num_workers"}, steps=2, repeats=1,
                          max_memory_bytes=None)  # fmt: skip
    riding = [v for v in choice.variants if v["field"] == "prefetch_factor"]
    assert len(riding) == 1 and riding[0]["name"].startswith("prefetch_factor=4")
    assert riding[0]["ratio"] > 0 and riding[0]["changes"] == {"prefetch_factor": 4}
    alone = choose_speed(TINY, cuda=False, pinned={"num_workers"}, steps=1, repeats=1,
                         max_memory_bytes=None)  # fmt: skip
    assert "prefetch_factor" not in [v["field"] for v in alone.variants]
