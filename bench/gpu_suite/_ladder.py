"""Stage ``ladder``: ViT-B/16 at 224 on synthetic data that lives on the GPU.

The plain fp32 loop, then +bf16 autocast, +fused AdamW, +torch.compile, +max-autotune (the
registry's ladder restricted to :data:`RUNGS`), at the batch size that a short sweep found
fastest, measured by :func:`tuner.compare.bench.run_benchmark`: images/s with its interval, paired
ratios, peak reserved and allocated memory, and MFU against the dense bf16 matmul rate timed in
the same run. The data-path knobs have nothing to move here (the data is already on the GPU);
the ``recipe`` stage measures them.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from tuner.compare import Arm, plan_ladder
from tuner.compare.bench import benchmark_config, run_benchmark
from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.report.bench import bench_markdown
from tuner.report.comparison import bar_plot
from tuner.report.document import markdown_table
from tuner.techniques import knob, ladder_knobs
from tuner.units import format_bytes
from tuner.workloads import MICRO_BENCH

from ._context import StageContext, StageResult

__all__ = ["RUNGS", "plan", "run"]

RUNGS = ("amp", "fused_adamw", "compile")  # plus compile's +max-autotune rung on a GPU
MFU_GOAL = 0.5
# A cold first build (max-autotune's kernel search: minutes) starts only with this much of the
# stage's time left, so at least two repeats still fit; otherwise the rung is left out. (Built
# inside a repeat instead, on an H200 2026-11-29, its kernel search outran the command and took
# every measured rung's numbers with it.)
_KEEP_FOR_REPEATS_S = 240.0

_TRACE_LEFT_S = 60.0  # a trace starts only with this much of the stage's time left
_TRACE_MOST_BYTES = 8 * 2**20  # a larger trace is dropped (the table stays)

_GPU: dict[str, Any] = {
    "workload": {},  # tuner.workloads.BENCH["gpu"]: ViT-B/16 at 224, synthetic, 1000 classes
    "batch_sizes": (64, 128, 256, 384, 512),
    "sweep_steps": 10,
    "steps": 30,
    "warmup_steps": 10,
    "matmul_size": 8192,
}
# The GPU plan's first command (``--plan 1``): a short sweep, every rung, two repeats.
_QUICK: dict[str, Any] = {
    **_GPU,
    "batch_sizes": (128, 256, 512),
    "sweep_steps": 5,
    "steps": 20,
    "warmup_steps": 5,
}
_DRY: dict[str, Any] = {
    "workload": MICRO_BENCH,  # its batch size is the sweep's to choose
    "batch_sizes": (8, 16),
    "sweep_steps": 2,
    "steps": 4,
    "warmup_steps": 1,
    "matmul_size": 256,
}


def plan(base: TrainConfig, *, cuda: bool, dry_run: bool) -> tuple[list[Arm], list[str]]:
    """The ladder's rungs as arms (:data:`RUNGS` of the registry's ladder, bf16), and the ladder
    knobs left out: every other one, and on the dry run the slow-to-build compile."""
    skip = [k.field for k in ladder_knobs() if k.field not in RUNGS or (dry_run and k.slow_build)]
    arms, _ = plan_ladder(base, cuda=cuda, amp="bf16", skip=skip, autotune=cuda)
    return arms, skip


def run(ctx: StageContext) -> StageResult:
    s = ctx.pick(_QUICK if ctx.options.get("quick") else _GPU, _DRY)
    workload = {**s["workload"], "device": ctx.device}  # over the device's bench workload
    base = benchmark_config(workload, steps=s["steps"], warmup_steps=s["warmup_steps"])
    arms, skip = plan(base, cuda=ctx.cuda, dry_run=ctx.dry_run)
    eager = [a for a in arms if a.config.compile == knob("compile").off]
    sweep, batch_size = _sweep(ctx, eager[-1].config, arms[0].config, s)
    ctx.write_csv("sweep.csv", sweep)
    compiled = [a for a in arms if a not in eager]
    compile_s = _warm_compile_caches(ctx, compiled, batch_size)
    unbuilt = [a.name for a in compiled if a.name not in compile_s]
    report = run_benchmark(
        workload={**workload, "batch_size": batch_size},
        steps=s["steps"],
        warmup_steps=s["warmup_steps"],
        repeats=ctx.repeats(2 if ctx.options.get("quick") else 3, 2),
        skip=(*skip, *(["compile"] if "+compile" in unbuilt else [])),
        autotune=ctx.cuda and not unbuilt,  # max-autotune rides on compile's rung
        amp="bf16",
        time_limit_s=ctx.remaining_s(),
        warmup=False,  # the sweep and the first builds paid the process's one-time costs
        matmul_size=s["matmul_size"],
        log=ctx.log,
    )
    report["unbuilt"] = unbuilt
    report["left_out"] += [
        f"{name}: its first build did not fit the stage's time (kept {_KEEP_FOR_REPEATS_S:.0f} s "
        "for the repeats), so it was not measured"
        for name in unbuilt
    ]
    report["sweep"] = sweep.to_dict(orient="records")
    report["first_build_s"] = compile_s
    if ctx.options.get("trace"):
        report["trace"] = _trace(ctx, arms, batch_size, report.get("best_rung"))
    _write(ctx, report, sweep, eager[-1].name)
    return _result(report)


def _trace(ctx: StageContext, arms: list[Arm], batch_size: int, best: str | None) -> str:
    """A profiler trace of the fastest rung's short run (its build from Inductor's warm caches,
    one warm-up and 2 measured steps): ``trace.json.gz`` (Perfetto, chrome://tracing) and
    ``trace_top.txt``, the ops by device time. For the MFU question: how much of a step is
    attention, the optimizer step, or gaps between launches."""
    import gzip
    import shutil

    from torch.profiler import ProfilerActivity, profile

    from tuner.engine import short_run

    if best is None or ctx.remaining_s() < _TRACE_LEFT_S:
        return f"no trace: {'no rung finished' if best is None else 'too little time left'}"
    arm = next(a for a in arms if a.name == best)
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if ctx.cuda else [])]
    with profile(activities=activities) as prof:
        result = short_run(arm.config.replace(batch_size=batch_size, warmup_steps=1), steps=2)
    raw = ctx.path("trace.json")
    prof.export_chrome_trace(str(raw))
    with raw.open("rb") as src, gzip.open(ctx.path("trace.json.gz"), "wb") as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    if ctx.path("trace.json.gz").stat().st_size > _TRACE_MOST_BYTES:  # the archive's room
        ctx.path("trace.json.gz").unlink()
    sort = "self_device_time_total" if ctx.cuda else "self_cpu_time_total"
    ctx.path("trace_top.txt").write_text(prof.key_averages().table(sort_by=sort, row_limit=40))
    return f"{best} at batch {batch_size}: {result.status}, trace_top.txt"


def _sweep(
    ctx: StageContext, top: TrainConfig, plain: TrainConfig, s: dict[str, Any]
) -> tuple[pd.DataFrame, int]:
    """Probe the fastest eager rung at each batch size; the fastest one at which the plain fp32
    loop also runs (the ladder starts there) wins.

    Raises:
        TunerError: no batch size of the sweep ran.
    """
    from tuner.engine import short_run

    rows: list[dict[str, Any]] = []
    for batch_size in s["batch_sizes"]:
        result = short_run(top.replace(batch_size=batch_size), steps=s["sweep_steps"])
        rows.append(
            {
                "batch_size": batch_size,
                "status": result.status,
                "images_per_second": result.images_per_second,
                "peak_memory_bytes": result.peak_memory_bytes,
                "error": result.error or "",
            }
        )
        ctx.log(f"sweep batch {batch_size}: {result.status} {result.images_per_second or 0:.1f}")
        if result.status == "oom":
            break  # a larger batch will not fit either
    frame = pd.DataFrame(rows).assign(plain_fp32_runs=pd.NA)
    for i in frame[frame["status"] == "ok"].sort_values("images_per_second").index[::-1]:
        fits = short_run(plain.replace(batch_size=int(frame.at[i, "batch_size"])), steps=1).ok
        frame.at[i, "plain_fp32_runs"] = fits
        if fits:
            return frame, int(frame.at[i, "batch_size"])
    raise TunerError(
        f"no batch size of the sweep {s['batch_sizes']} ran in both fp32 and bf16; "
        "see sweep.csv for the errors."
    )


def _warm_compile_caches(ctx: StageContext, arms: list[Arm], batch_size: int) -> dict[str, float]:
    """Build each compiled rung once, unrecorded, and return how long each first build took.

    A cold first compile (max-autotune's kernel search above all) can take minutes; Inductor's
    on-disk caches then make the measured repeats' fresh builds take seconds, so the repeats
    are alike and more of them fit in the stage's time.
    """
    from tuner.engine import short_run

    seconds: dict[str, float] = {}
    for arm in arms:
        if ctx.remaining_s() < _KEEP_FOR_REPEATS_S:
            ctx.log(f"first build of {arm.name} left out ({ctx.remaining_s():.0f} s left)")
            continue
        result = short_run(arm.config.replace(batch_size=batch_size), steps=1)
        seconds[arm.name] = result.wall_time_s
        ctx.log(f"first build of {arm.name}: {result.status}, {result.wall_time_s:.0f} s")
    return seconds


def _write(ctx: StageContext, report: dict[str, Any], sweep: pd.DataFrame, swept: str) -> None:
    rows = pd.DataFrame(report["rows"])
    ctx.write_json("ladder.json", report)
    ctx.write_csv("ladder.csv", rows)
    ctx.write_csv("runs.csv", pd.DataFrame(report["runs"]))
    plot = bar_plot(
        rows,
        [("images_per_second", 1.0, "images/s"), ("peak_memory_bytes", 2**30, "peak, GiB")],
        ctx.path("ladder.png"),
        title=f"{report['config']['model']}, batch {report['config']['batch_size']}",
    )
    sweep_lines = [
        f"## Batch-size sweep ({swept} rung, {len(sweep)} sizes)",
        "The fastest batch at which the plain fp32 loop also runs is the ladder's batch.",
        markdown_table(_shown_sweep(sweep)),
    ]
    first = ", ".join(f"{k} {v:.0f} s" for k, v in report["first_build_s"].items())
    goal = [
        _goal_sentence(report),
        f"Profiler trace: {report.get('trace', 'not asked for')}.",
        f"First (cold-cache) build and compile, before the repeats: {first or 'none'}.",
        f"![images/s and peak memory per rung]({plot.name})",
    ]
    ctx.path("ladder.md").write_text(bench_markdown(report) + "\n\n".join([*goal, *sweep_lines]))


def _shown_sweep(sweep: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "batch size": sweep["batch_size"],
            "status": sweep["status"],
            "images/s": sweep["images_per_second"].map(lambda v: "" if pd.isna(v) else f"{v:,.1f}"),
            "peak memory": sweep["peak_memory_bytes"].map(format_bytes),
            "plain fp32 runs": sweep["plain_fp32_runs"],
        }
    )


def _goal_sentence(report: dict[str, Any]) -> str:
    mfu = report.get("best_mfu")
    if mfu is None:
        return "No rung finished: no MFU to compare with the goal."
    return (
        f"Best rung {report['best_rung']}: MFU {mfu:.1%} of the {report['mfu_reference']} matmul "
        f"rate measured in this run, against the goal of {MFU_GOAL:.0%} "
        f"({'reached' if mfu >= MFU_GOAL else f'{MFU_GOAL / mfu:.1f}x short'})."
    )


def _result(report: dict[str, Any]) -> StageResult:
    rows = report["rows"]
    finished = [r for r in rows if r["images_per_second"] is not None]
    ok = len(finished) == len(rows) and report["repeats"] >= 2  # one repeat has no interval
    unbuilt = report.get("unbuilt") or []
    left = f" ({', '.join(unbuilt)} left out: no time to build)" if unbuilt else ""
    measured = f"{len(finished)}/{len(rows)} rungs measured{left}; "
    return StageResult(ok, measured + _goal_sentence(report))
