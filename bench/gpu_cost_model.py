"""A cost model of a search: where a search's time goes, probes and training, before it runs.

It runs the search's own speed-probe plan (:func:`tuner.speed.session.settle_speed`: the real
scopes, sharing, budget, top-ups and decision rule, against a real
:class:`tuner.speed.cache.ProbeCache`) over the configs the space's own sampler draws, with
every probe run and every trial *predicted* from a device profile instead of run:

- a run costs ``build_s`` (model, optimizer, data) plus its steps at the config's step time,
  plus a knob's own cost per run (``arm_build_s``: loader workers are processes a run starts);
  a process's first run adds ``first_run_s`` (CUDA context, imports), and, where the code pays
  them before its probes (plan ``after``: ``engine.prepare``), ``prepare_s`` goes there;
- a step's time is the profile's plain step time at the config's batch size and precision,
  divided by the kept knobs' speed-ups (compile's first build ``compile_build_s`` is paid once
  per process: the second compiled run of the H100 ladder took 3.8 s, the first 31.9 s);
- a trial trains the steps of its budget (its images at its batch size, rounded up, or its
  steps), or until its time budget, evaluates every ``eval_every_images`` (the steps that
  take at its batch), ``eval_every_steps`` or ``eval_every_s`` (``eval_s`` each), and reports
  at each evaluation.

Trials run one after the other (one GPU). It predicts the search's wall time, the probe share
(probe seconds over trial seconds, as trials.csv counts it) and the first trial's first report,
``--plan before`` (every training config probed on its own, every knob, unbounded: the rule
before the probe budget) or ``after`` (this tree's rule).

    .venv/bin/python bench/gpu_cost_model.py                     # the H100 profile, vit_space
    .venv/bin/python bench/gpu_cost_model.py --profile cpu-2core --space vit_space
Writes reports/benchmarks/gpu_cost_model.json and .md (the H100 prediction before and after,
and the CPU prediction beside the measured cold searches of bench/cold_search.py).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import optuna

from tuner.config import TrainConfig
from tuner.engine import RunResult
from tuner.engine.build import warmup_steps_of
from tuner.spaces import get_space, train_config_of
from tuner.speed.budget import run_cost
from tuner.speed.cache import ProbeCache
from tuner.speed.choose import choose_speed
from tuner.speed.machine_cache import this_machine
from tuner.speed.session import TrialSpeed, settle_speed

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports" / "benchmarks"
H100 = ROOT / "reports" / "examples" / "gpu-nvidia-h100-80gb-hbm3"


@dataclass(frozen=True)
class Profile:
    """What a device costs. Every number's source is in ``sources``."""

    name: str
    cuda: bool
    cores: int
    build_s: float  # one engine run's setup: model, optimizer, data
    first_run_s: float  # one-time costs of a process's first run
    ref_batch: int  # the batch size the step times below were measured at
    step_s: dict[str, float]  # amp -> plain step time at ref_batch (the space's model)
    speedups: dict[str, float]  # knob field -> images/s ratio vs plain (1.0: a tie)
    compile_build_s: float
    eval_s: float
    search_start_s: float  # Ray's start and the search's checks, before the first trial
    sources: dict[str, str] = field(default_factory=dict)
    # A trial process's one-time costs that engine.prepare pays before its speed probes (the
    # kept dataset, the device's start), in plan "after"; part of first_run_s before that.
    prepare_s: float = 0.0
    # A knob's own cost per run, beyond the plain run's (field -> seconds): loader workers are
    # processes a run starts (measured by --measure-cpu; the H100 figures have none).
    arm_build_s: dict[str, float] = field(default_factory=dict)


# ViT-B/16 at 224, batch 256, on the H100 (reports/examples/gpu-nvidia-h100-80gb-hbm3/
# engine_cuda.json): plain fp32 0.624 s/step, bf16 0.103 s, compiled 0.078 s (1.32x bf16);
# set_to_none, non_blocking, prefetch, channels_last ties; fused AdamW 1.01x; a run's setup
# (wall - train) 1.2-2.6 s, median 1.9 s; compile's first build 31.9 - 1.9 = 30 s of training
# time. vit_space's GPU model is vit_small_r26_s32_224: 3.6 GMACs against ViT-B/16's 17.6
# (timm), run at half ViT-B's MFU (a smaller model keeps the GPU less busy: an assumption, not a
# measurement): its step time is ViT-B's x 3.6 / 17.6 / 0.5 = 0.41x.
_VIT_S_R26 = 3.6 / 17.6 / 0.5
H100_VIT_SPACE = Profile(
    name="h100-vit_space",
    cuda=True,
    cores=16,
    build_s=1.9,
    first_run_s=8.0,
    ref_batch=256,
    step_s={"off": 0.624 * _VIT_S_R26, "bf16": 0.103 * _VIT_S_R26, "fp16": 0.103 * _VIT_S_R26},
    speedups={"compile": 1.32, "fused_adamw": 1.01},
    compile_build_s=30.0,
    eval_s=1.0,
    search_start_s=13.0,
    sources={
        "step_s, speedups, build_s, compile_build_s": "H100 ladder, engine_cuda.json (ViT-B/16), "
        "scaled to vit_small_r26_s32_224 by GMACs at half the MFU (assumed)",
        "first_run_s": "assumed: CUDA context and cuDNN/cuBLAS initialization",
        "search_start_s": "search-4-verbose.log: the first trial started 13 s in",
        "eval_s": "assumed: the digits validation split (360 images) at 224 px",
        "loader knobs": "assumed ties: the digits are tensors in host memory, not decoded files",
    },
)


def _on(value: Any) -> bool:
    """Whether a knob's value is on (not its off value)."""
    return value not in (False, None, "off", 0)


def cpu_profile(measured: dict[str, Any]) -> Profile:
    """The 2-core CPU profile from :func:`measure_cpu` (this machine's own short runs)."""
    return Profile(
        name="cpu-2core",
        cuda=False,
        cores=2,
        build_s=measured["build_s"],
        first_run_s=measured["first_run_s"],
        ref_batch=measured["ref_batch"],
        step_s=measured["step_s"],
        speedups=measured["speedups"],
        compile_build_s=0.0,
        eval_s=measured["eval_s"],
        search_start_s=measured["search_start_s"],
        sources={"all": "bench/gpu_cost_model.py --measure-cpu on this machine (short runs)"},
        prepare_s=measured.get("prepare_s", 0.0),
        arm_build_s=measured.get("arm_build_s", {}),
    )


@dataclass
class _Device:
    """The predicted engine: one process's runs, with its clock."""

    profile: Profile
    clock: float = 0.0
    warm: bool = False
    compiled: set[str] = field(default_factory=set)
    prepared: bool = False

    def step_s(self, config: TrainConfig) -> float:
        base = self.profile.step_s.get(config.amp, self.profile.step_s["off"])
        speed = 1.0
        for name, ratio in self.profile.speedups.items():
            if _on(getattr(config, name)):
                speed *= ratio
        return base * config.batch_size / self.profile.ref_batch / speed

    def run(self, config: TrainConfig, steps: int, limit: float | None) -> RunResult:
        """One short run, predicted; the clock moves by its wall time."""
        setup = self.profile.build_s + self.one_time_s()
        step = self.step_s(config)
        compile_s = self._compile(config)
        done = steps + warmup_steps_of(config)
        train = compile_s + done * step
        if limit is not None and train > limit:
            done, train = max(0, int((limit - compile_s) / step)), limit
        extra = sum(s for f, s in self.profile.arm_build_s.items() if _on(getattr(config, f)))
        wall = setup + train + extra
        self.clock += wall
        return RunResult(
            status="ok",
            images_per_second=config.batch_size / step,
            step_time_s=step,
            train_time_s=train,
            wall_time_s=wall,
            setup_time_s=setup,
            steps=done,
            peak_memory_bytes=1,
            memory_kind="cuda_max_memory_reserved" if self.profile.cuda else "cpu_training_state",
        )

    def one_time_s(self) -> float:
        """The process's one-time costs its first run pays (engine.prepare's, unless paid)."""
        paid = (0.0 if self.warm else self.profile.first_run_s) + (
            0.0 if self.prepared else self.profile.prepare_s
        )
        self.warm = self.prepared = True
        return paid

    def _compile(self, config: TrainConfig) -> float:
        if config.compile == "off":
            return 0.0
        key = json.dumps([config.model, config.batch_size, config.amp, config.img_size])
        first = key not in self.compiled
        self.compiled.add(key)
        return self.profile.compile_build_s if first else 0.1 * self.profile.compile_build_s


def configs_of(space: str, samples: int, *, cuda: bool, seed: int = 0) -> list[TrainConfig]:
    """The training configs the space's own sampler draws (random, like the start-up design)."""
    loaded = get_space(space)
    workload = dict(loaded.workloads["gpu" if cuda else "cpu"])
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    out = []
    for _ in range(samples):
        trial = study.ask()
        params = loaded.sample(trial, cuda=cuda, fixed={})
        study.tell(trial, 0.0)
        device = "cuda" if cuda else "cpu"
        out.append(train_config_of(params, workload={**workload, "device": device},
                                   search_only=("base_lr",)))  # fmt: skip
    return out


def predict(profile: Profile, configs: list[TrainConfig], *, plan: str, share: float = 0.2,
            repeats: int = 2, probe_steps: int = 5) -> dict[str, Any]:  # fmt: skip
    """The predicted search: per trial its probe seconds and length, and the totals."""
    device = _Device(profile)
    device.clock = profile.search_start_s
    with tempfile.TemporaryDirectory() as tmp:
        cache = ProbeCache(str(Path(tmp) / "probe_cache.json"))
        options = {"plan": plan, "share": share, "repeats": repeats, "probe_steps": probe_steps}
        trials = [_trial(device, cache, c, str(i), **options) for i, c in enumerate(configs)]
    probe = sum(t["probe_s"] for t in trials)
    total = sum(t["trial_s"] for t in trials)
    return {
        "profile": profile.name,
        "profile_start_s": profile.search_start_s,
        "plan": plan,
        "trials": trials,
        "wall_s": round(device.clock, 1),
        "probe_s": round(probe, 1),
        "trial_time_s": round(total, 1),
        "probe_share": round(probe / total, 3) if total else math.nan,
        "first_report_s": trials[0]["first_report_s"] if trials else math.nan,
    }


def _trial(device: _Device, cache: ProbeCache, config: TrainConfig, trial_id: str, *, plan: str,
           share: float, repeats: int, probe_steps: int) -> dict[str, Any]:  # fmt: skip
    start = device.clock
    spent: list[float] = []

    def on_run(event: dict[str, Any]) -> None:
        if event["event"] == "end":
            spent.append(event["wall_s"])

    def measure(c: TrainConfig, steps: int, limit: float | None) -> RunResult:
        return device.run(c, steps, limit)

    if plan == "after" and not device.prepared:  # engine.prepare: the trial's setup
        device.clock += device.profile.prepare_s
        device.prepared = True
    if plan == "before":
        choice = choose_speed(config, cuda=device.profile.cuda, pinned=(), steps=probe_steps,
                              repeats=repeats, max_memory_bytes=None, cores=device.profile.cores,
                              on_run=on_run, measure=measure)  # fmt: skip
        settings = choice.settings
    else:
        speed = TrialSpeed(cuda=device.profile.cuda, device_name=device.profile.name, pinned=(),
                           cores=device.profile.cores, threads=1, machine=this_machine(),
                           max_memory_bytes=None, steps=probe_steps, repeats=repeats,
                           share=share)  # fmt: skip
        settings = settle_speed(
            config, speed, _Store(cache, trial_id), on_run, measure
        ).choice.settings
    probe_s = sum(spent)
    trained = config.replace(**settings)
    first_report = _train(device, trained)
    # The trainable tells the cache what its run cost: the prior of later probe runs.
    cache.observe(run_cost(trained.to_dict(), device.profile.build_s, device.step_s(trained)))
    trial_s = device.clock - start
    cache.earn(trial_id, share * trial_s)
    return {
        "config": {k: getattr(config, k) for k in ("batch_size", "norm", "gn_groups", "amp")},
        "settings": settings,
        "probe_s": round(probe_s, 2),
        "trial_s": round(trial_s, 2),
        "first_report_s": round(first_report - start + (device.profile.search_start_s
                                                        if trial_id == "0" else 0.0), 1),
    }  # fmt: skip


def _train(device: _Device, config: TrainConfig) -> float:
    """The trial's own run; returns the clock at its first report (its first evaluation)."""
    profile = device.profile
    setup = profile.build_s + device.one_time_s()
    step = device.step_s(config)
    limits = [config.step_limit()]  # images at its batch, rounded up, or steps
    if config.time_budget_s is not None:
        limits.append(int(config.time_budget_s / step))
    steps = min(limit for limit in limits if limit is not None)
    every = config.eval_every_steps or steps
    if config.eval_every_images:
        every = math.ceil(config.eval_every_images / config.batch_size)
    elif config.eval_every_s:
        every = max(1, math.ceil(config.eval_every_s / step))
    device.clock += setup + device._compile(config) + warmup_steps_of(config) * step
    first_report = device.clock + min(every, steps) * step + profile.eval_s
    evals = max(1, math.ceil(steps / every))
    device.clock += steps * step + evals * profile.eval_s
    return first_report


@dataclass
class _Store:
    """One trial's view of the cache (the trainable's Ray adapter, without Ray)."""

    cache: ProbeCache
    trial_id: str

    def get(self, lookup: Any) -> Any:
        return self.cache.get(lookup)

    def put(self, lookup: Any, choice: dict[str, Any]) -> None:
        self.cache.put(lookup, choice)

    def draw(self, earned_s: float) -> float | None:
        return self.cache.draw(self.trial_id, earned_s)

    def settle(self, returned_s: float, spent_s: float, earned_late_s: float) -> None:
        self.cache.settle(self.trial_id, returned_s, spent_s, earned_late_s)

    def claim(self, key: str, for_s: float) -> bool:
        return True  # one trial at a time

    def prior_run_s(self, config: dict[str, Any], steps: int) -> float | None:
        return self.cache.prior_run_s(config, steps)

    def tell(self, what: str) -> None:
        return None


def measure_cpu(space: str, path: Path, search_start_s: float) -> dict[str, Any]:
    """This machine's CPU profile for ``space``'s CPU workload: a first run and later ones of
    the plain setting (their setup is the build, the first's extra its one-time costs), the
    step time per precision, one evaluation. ``search_start_s``: read off a search's console
    (its first trial's start line)."""
    import time

    from tuner.engine import prepare, short_run, train

    workload = dict(get_space(space).workloads["cpu"])
    config = train_config_of({"batch_size": 64}, workload={**workload, "device": "cpu"})
    started = time.perf_counter()
    prepare(config)  # what a trial pays before its probes (plan "after")
    prepare_s = time.perf_counter() - started
    first = short_run(config, steps=5)
    again = [short_run(config, steps=5) for _ in range(2)]
    step_s = {"off": statistics.median(r.step_time_s for r in again)}
    step_s["bf16"] = short_run(config.replace(amp="bf16"), steps=5).step_time_s
    evaluated = train(config.replace(steps=3, eval_every_steps=None, time_budget_s=None))
    # Loader workers: processes each run starts (their import of torch), beyond the plain run.
    loaded = [short_run(config.replace(num_workers=2), steps=5) for _ in range(2)]
    workers_s = statistics.median(r.wall_time_s for r in loaded) - statistics.median(
        r.wall_time_s for r in again
    )
    profile = {
        "build_s": statistics.median(r.setup_time_s for r in again),
        "first_run_s": max(0.0, first.wall_time_s - again[0].wall_time_s),
        "ref_batch": 64,
        "step_s": step_s,
        "speedups": {},
        "eval_s": evaluated.eval_time_s,
        "search_start_s": search_start_s,
        "prepare_s": prepare_s,
        "arm_build_s": {"num_workers": max(0.0, workers_s)},
    }
    path.write_text(json.dumps(profile, indent=1) + "\n")
    return profile


def _measured_configs(space: str, path: Path) -> list[TrainConfig]:
    """The training configs a measured search ran, in its order (its trials.csv)."""
    import pandas as pd

    table = pd.read_csv(path).sort_values("started_at")
    workload = {**get_space(space).workloads["cpu"], "device": "cpu"}
    out = []
    for _, row in table.iterrows():
        params = {k: row[f"param_{k}"] for k in ("batch_size", "norm", "amp", "lr")
                  if f"param_{k}" in row and row[f"param_{k}"] == row[f"param_{k}"]}  # fmt: skip
        if row.get("param_norm") == "group":
            params["gn_groups"] = int(row["param_gn_groups"])
        params["batch_size"] = int(params["batch_size"])
        out.append(train_config_of(params, workload=workload))
    return out


def _measured_search(trials: Path, commit: str | None) -> dict[str, Any]:
    """The cold_search.json record whose trials table ``trials`` is (its log's name); for a
    search that bench/cold_search.py did not run (a report's trials.csv, with ``commit`` the
    code it ran), the same figures from the table itself: the trials' seconds, and the probe
    share as trials.csv counts it (probe and probe-wait seconds over the trials' seconds)."""
    records = json.loads((OUT / "cold_search.json").read_text())
    for record in records:
        log = record.get("log")  # the first record, stopped by hand, kept none
        if log and Path(log).with_suffix(".trials.csv").name == trials.name:
            return record
    if commit is None:
        raise SystemExit(
            f"{trials}: no run of reports/benchmarks/cold_search.json wrote it (give "
            "--cpu-commit to read it as a report's trials.csv)"
        )
    import pandas as pd

    table = pd.read_csv(trials)
    probe = (table["speed_probe_time_s"].fillna(0) + table["speed_probe_wait_s"].fillna(0)).sum()
    seconds = float(table["trial_time_s"].sum())
    return {
        "commit": commit,
        "trials": len(table),
        "trial_time_s": seconds,
        "probe_s": float(probe),
        "probe_share": float(probe) / seconds,
        "log": str(trials),
    }


def _cpu_checks(args: argparse.Namespace, runs: list[dict[str, Any]]) -> list[str]:
    """Each measured CPU search predicted from its own trials' configs (appended to ``runs``):
    one table line each, predicted against measured."""
    profile = cpu_profile(json.loads(args.cpu_profile.read_text()))
    lines = []
    for trials in args.cpu_trials:
        configs = _measured_configs(args.space, trials)
        measured = _measured_search(trials, args.cpu_commit)
        plan = "before" if measured["commit"].startswith(args.before_commit) else "after"
        predicted = predict(profile, configs, plan=plan)
        runs.append({**predicted, "measured": measured})
        lines.append(_check_line(predicted, measured))
    return lines


_CHECK_TEXT = (
    "CPU check: each measured cold search (bench/cold_search.py's, or a report's trials.csv "
    "with --cpu-commit) predicted from its own trials' configs, in their order, with the plan "
    "of its code:"
)
_CHECK_HEAD = [
    "| commit | plan | trials | trial s predicted / measured | probe share predicted / measured |",
    "|---|---|---|---|---|",
]


def _check_line(predicted: dict[str, Any], measured: dict[str, Any]) -> str:
    """Predicted against measured: the trials' seconds (their ratio) and the probe share."""
    ratio = predicted["trial_time_s"] / measured["trial_time_s"]
    return (
        f"| {measured['commit']} | {predicted['plan']} | {len(predicted['trials'])} | "
        f"{predicted['trial_time_s']:.0f} / {measured['trial_time_s']:.0f} ({ratio:.2f}x) | "
        f"{predicted['probe_share']:.0%} / {measured['probe_share']:.0%} |"
    )


def _budget_text(config: TrainConfig) -> str:
    """What each GPU trial trains, in the budget's own unit; and that this is a prediction."""
    if config.images is not None:
        budget = f"{config.images:,} images (every batch size the same images, within one batch)"
    else:
        budget = f"{config.steps} steps" if config.steps else "its epochs"
    cadence = next(
        (f"every {v:,} {unit}" for v, unit in ((config.eval_every_images, "images"),
         (config.eval_every_steps, "steps"), (config.eval_every_s, "s")) if v),
        "at each epoch end",
    )  # fmt: skip
    cap = f", a {config.time_budget_s:g} s cap" if config.time_budget_s else ""
    return (
        f"A prediction, not a measurement (no GPU ran): each GPU trial trains {budget}, "
        f"evaluated {cadence}{cap}."
    )


def _summary(run: dict[str, Any]) -> str:
    return (
        f"| {run['profile']} | {run['plan']} | {len(run['trials'])} | {run['wall_s']:.0f} | "
        f"{run['probe_s']:.0f} | {run['probe_share']:.0%} | {run['first_report_s']:.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", default="vit_space")
    parser.add_argument("--samples", type=int, default=None, help="default: the space's")
    parser.add_argument("--images", type=int, help="each GPU trial's images (the workload's)")
    parser.add_argument("--time-budget-s", type=float, help="each GPU trial's time budget")
    parser.add_argument("--out", default="gpu_cost_model", help="file name under reports/")
    parser.add_argument("--cpu-profile", type=Path, help="a measured CPU profile (JSON)")
    parser.add_argument("--cpu-trials", type=Path, action="append", default=[],
                        help="a measured CPU search's trials.csv: predict its configs")  # fmt: skip
    parser.add_argument(
        "--cpu-commit",
        default=None,
        help="the commit a --cpu-trials table outside cold_search.json ran",
    )
    parser.add_argument("--before-commit", default="416680d",
                        help="a measured search of it is predicted by plan before")  # fmt: skip
    parser.add_argument("--measure-cpu", type=float, metavar="SEARCH_START_S",
                        help="measure the CPU profile into --cpu-profile first")  # fmt: skip
    args = parser.parse_args()
    if args.measure_cpu is not None and args.cpu_profile:
        measure_cpu(args.space, args.cpu_profile, args.measure_cpu)
    runs = []
    space = get_space(args.space)
    gpu_n = args.samples or space.num_samples.get("gpu", 48)
    gpu = configs_of(args.space, gpu_n, cuda=True)
    changes = {k: v for k, v in (("images", args.images), ("time_budget_s", args.time_budget_s))
               if v is not None}  # fmt: skip
    gpu = [c.replace(**changes) for c in gpu]
    for plan in ("before", "after"):
        runs.append(predict(H100_VIT_SPACE, gpu, plan=plan))
    checks = _cpu_checks(args, runs) if args.cpu_profile else []
    OUT.mkdir(parents=True, exist_ok=True)
    record = {"runs": runs, "profiles": [asdict(H100_VIT_SPACE)]}
    record["gpu_changes"] = changes
    (OUT / f"{args.out}.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    lines = ["| profile | plan | trials | wall s | probe s | probe share | first report s |",
             "|---|---|---|---|---|---|---|", *(_summary(r) for r in runs)]  # fmt: skip
    print("\n".join(lines))
    sources = [f"- {k}: {v}" for k, v in H100_VIT_SPACE.sources.items()]
    head = [f"# Cost model: {args.space}, predicted", "", __doc__.split("\n\n")[1], "",
            f"GPU trials changed: {changes or 'none (the workload as declared)'}.", "",
            _budget_text(gpu[0]), ""]  # fmt: skip
    if checks:
        lines += ["", _CHECK_TEXT, "", *_CHECK_HEAD, *checks]
    (OUT / f"{args.out}.md").write_text("\n".join([*head, *lines, "", "Inputs:", *sources]) + "\n")
    for run in runs:
        ends = [run["profile_start_s"] + sum(t["trial_s"] for t in run["trials"][: i + 1])
                for i in range(len(run["trials"]))]  # fmt: skip
        print(run["profile"], run["plan"], "trials ended by 300/400/540 s:",
              [sum(e <= limit for e in ends) for limit in (300, 400, 540)])  # fmt: skip


if __name__ == "__main__":
    main()
