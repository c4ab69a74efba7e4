"""The technique registry: every knob is declared once, and everything else derives from it."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from tuner.compare import dp_vs_ddp, plan_ladder, plan_toggles
from tuner.compare.ablation import skippable
from tuner.config import TrainConfig, config_fields, field_help
from tuner.engine import short_run
from tuner.errors import TunerError
from tuner.record import EFFECTIVE_PREFIX
from tuner.record import engine_values as result_metrics
from tuner.report._effects import observed_techniques
from tuner.techniques import (
    KNOBS,
    accuracy_neutral_fields,
    knob,
    ladder,
    ladder_knobs,
    settings_text,
    speed_knobs,
)
from tuner.workloads import MICRO_VIT

NEUTRAL = {"set_to_none", "non_blocking", "pin_memory", "prefetch", "channels_last", "compile",
           "fused_adamw", "num_workers", "persistent_workers", "prefetch_factor",
           "host_prefetch", "decoder", "ddp_bucket_cap_mb", "ddp_gradient_as_bucket_view",
           "ddp_static_graph"}  # fmt: skip
TRAINING = {"amp", "norm", "gn_groups", "batch_size", "lr"}
TINY = TrainConfig(
    **MICRO_VIT, img_size=16, batch_size=16, epochs=None, steps=2, warmup_steps=1, device="cpu"
)


def test_the_registry_says_which_knobs_change_the_maths() -> None:
    assert {k.field for k in KNOBS if k.accuracy_neutral} == NEUTRAL
    assert {k.field for k in KNOBS if not k.accuracy_neutral} == TRAINING
    assert set(accuracy_neutral_fields()) == NEUTRAL  # weight_decay, no knob, is not neutral


@pytest.mark.parametrize("entry", KNOBS, ids=lambda k: k.field)
def test_every_knob_is_a_config_field_with_help_and_an_off_default(entry) -> None:
    assert entry.field in config_fields() and field_help(entry.field) and entry.label
    assert entry.off == getattr(TrainConfig(), entry.field)


@pytest.mark.parametrize(
    ("field", "value"),
    [(k.field, v) for k in KNOBS if not k.companion for v in (*k.cpu, *k.cuda)],
    ids=str,
)
def test_every_on_value_makes_a_valid_config_with_what_it_implies(field: str, value) -> None:
    config = _with_its_parent(TINY, knob(field)).replace(**knob(field).settings(value))
    assert getattr(config, field) == value
    back = config.replace(**knob(field).settings(knob(field).off))  # and back off again
    assert getattr(back, field) == knob(field).off


def _with_its_parent(config: TrainConfig, entry) -> TrainConfig:
    """``config`` with what ``entry`` acts on: the knob it rides on switched on (workers for
    prefetch_factor), image files for the decoder."""
    if entry.after:
        config = config.replace(**knob(entry.after).settings(knob(entry.after).cpu[0]))
    return config.replace(data="jpeg_digits", img_size=32) if entry.files_only else config


def test_switching_a_knob_off_switches_off_what_rides_on_it() -> None:
    riding = TINY.replace(num_workers=1, persistent_workers=True, prefetch_factor=4)
    off = riding.replace(**knob("num_workers").settings(0))  # valid: no prefetch_factor left
    assert (off.num_workers, off.persistent_workers, off.prefetch_factor) == (0, False, None)
    with pytest.raises(TunerError, match="prefetch_factor=4 needs num_workers > 0"):
        TINY.replace(prefetch_factor=4)


# torch.compile on a CPU compiles for tens of seconds: tests/engine/test_engine_loop.py runs it.
@pytest.mark.parametrize("entry", [k for k in KNOBS if k.cpu and not k.companion
                                   and not k.slow_build and not k.needs_workers],
                         ids=lambda k: k.field)  # fmt: skip
def test_every_cpu_knob_runs_a_real_step_and_reports_what_ran(entry) -> None:
    result = short_run(
        _with_its_parent(TINY, entry).replace(**entry.settings(entry.cpu[0])), steps=1
    )
    assert result.status == "ok", result.error
    metrics = result_metrics(result)
    assert metrics[EFFECTIVE_PREFIX + entry.field] == entry.cpu[0]


def test_every_speed_technique_appears_in_the_ladder_or_the_effects() -> None:
    rungs, _ = ladder(cuda=True, autotune=True)
    in_ladder = {r.knob for r in rungs}
    assert in_ladder - {None} == {k.field for k in ladder_knobs()}
    # Workers on, and image files: the knobs that ride on workers and the decoder act too.
    config = TINY.replace(norm="group", gn_groups=4, num_workers=2, data="jpeg_digits")
    arms, _ = plan_toggles(config, cuda=True)
    toggled = {field for a in arms for field in a.changes}
    for entry in speed_knobs(cuda=True):
        assert entry.field in in_ladder | toggled, entry.field
    assert set(skippable()) == {k.field for k in ladder_knobs()} | {"norm", dp_vs_ddp.SKIP}


def test_cpu_ladder_leaves_out_what_needs_cuda_and_keeps_every_rung_cumulative() -> None:
    arms, left_out = plan_ladder(TINY, cuda=False)
    assert [a.name for a in arms][:2] == ["plain", "+amp"]
    assert left_out == ["non_blocking: needs CUDA", "prefetch: needs CUDA"]
    for before, after in itertools.pairwise(arms):
        changed = {k for k, v in after.config.to_dict().items() if before.config.to_dict()[k] != v}
        assert changed == set(after.changes) and after.reference == before.name


def test_every_knob_that_ran_appears_in_the_report_table() -> None:
    rows = []
    for i, entry in enumerate(k for k in KNOBS if not k.companion):
        row = {EFFECTIVE_PREFIX + k.field: k.off for k in KNOBS}
        row[EFFECTIVE_PREFIX + entry.field] = (entry.cuda or entry.cpu or (1,))[0]
        rows.append({"status": "ok", "images_per_second": 100.0 + i, **row})
    table = observed_techniques(pd.DataFrame(rows))
    assert {k.label for k in KNOBS if not k.companion} == set(table["technique"])


def test_a_cuda_only_switch_on_cpu_counts_as_off() -> None:
    asked = TINY.replace(prefetch="cuda_stream", pin_memory=True)
    metrics = result_metrics(short_run(asked, steps=1))
    assert metrics["effective_prefetch"] == "off" and "prefetch" in metrics["notes"]
    table = observed_techniques(pd.DataFrame([{**metrics, "status": "ok"}]))
    prefetch = table[table["technique"] == knob("prefetch").label]
    assert list(prefetch["ran with"]) == ["prefetch=off"]


def test_speed_settings_in_words_name_what_is_on() -> None:
    settings = {"channels_last": True, "num_workers": 1, "persistent_workers": True,
                "set_to_none": False}  # fmt: skip
    assert settings_text(settings) == "channels_last, num_workers=1"  # companions unsaid
    assert settings_text({}) == settings_text({"fused_adamw": False}) == "plain"


def test_a_knob_that_needs_workers_runs_off_in_one_process_and_says_so() -> None:
    needs = [k for k in KNOBS if k.needs_workers]
    assert needs and not {k.field for k in needs} & {k.field for k in speed_knobs(cuda=True)}
    assert {k.field for k in needs} <= {k.field for k in speed_knobs(cuda=False, workers=2)}
    asked = TINY.replace(**{k.field: k.cpu[0] for k in needs})
    result = short_run(asked, steps=1)
    assert result.status == "ok" and result.world_size == 1
    assert all(result.effective[k.field] == k.off for k in needs)
    assert any("needs more than one worker" in note for note in result.notes)
