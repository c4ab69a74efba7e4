"""The training loop: ``train(config) -> RunResult`` and the search's feasibility ``probe``.

Read it top to bottom: build the run, then per step fetch a batch (timed as data wait), set the
lr, forward/backward under one autocast context, unscale + clip, step, zero the grads; every
window flush the losses (NaN/inf -> diverged) and, at each epoch end or ``eval_every_steps``,
evaluate and call ``on_eval``. A failing run (OOM, divergence, crash) returns a result.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch._dynamo
import torch.nn.functional as F

from tuner.config import TrainConfig
from tuner.engine.build import COMPILE_WARMUP_STEPS, Run, build_run, lr_at, resolve_device
from tuner.engine.data import UnreadableImage, normalize
from tuner.engine.meters import WINDOW_STEPS, MemoryMeter, ThroughputMeter, environment
from tuner.engine.result import RunResult
from tuner.engine.state import Progress, load_state, make_state
from tuner.errors import TunerError

__all__ = ["probe", "train"]

OnEval = Callable[[Progress], Any]
# Called once, early in a run, with the result so far (memory counted, a first throughput
# window measured); returning True stops the run there: the search's feasibility probe is the
# first steps of the trial's own run.
OnProbe = Callable[[RunResult], bool]


class Diverged(RuntimeError):
    """The training loss became NaN or infinite."""


def train(
    config: TrainConfig,
    *,
    on_eval: OnEval | None = None,
    resume_state: dict[str, Any] | None = None,
    progress_bar: bool = False,
    on_probe: OnProbe | None = None,
    probe_steps: int = 5,
) -> RunResult:
    """Run one measured training run of ``config``.

    Args:
        config: the run's settings.
        on_eval: called with a :class:`Progress` after each evaluation; returning ``True``
            stops the run early (status stays ``ok``).
        resume_state: a ``Progress.state_dict()`` to continue from (the step count carries on).
        progress_bar: show a tqdm bar on stderr.
        on_probe: called once after the warm-up and ``probe_steps`` more steps with the result
            so far (peak memory counted, throughput measured); returning ``True`` stops the run
            there, before any evaluation. Not called when resuming.
        probe_steps: measured steps before ``on_probe``.

    Returns:
        The run's :class:`RunResult`; OOM / NaN / crashes come back as its ``status``.

    Raises:
        TunerError: bad input, found before training starts.
    """
    hooks = _Hooks(on_eval, None if resume_state is not None else on_probe, probe_steps)
    return _execute(config, hooks, resume_state, progress_bar, evaluate=True)


def probe(config: TrainConfig, *, steps: int = 10) -> RunResult:
    """Run ``config.warmup_steps + steps`` training steps, no evaluation: memory and speed.

    Raises:
        TunerError: bad input.
    """
    if steps < 1:
        raise TunerError(f"probe steps={steps} must be at least 1.")
    warmup = max(config.warmup_steps, COMPILE_WARMUP_STEPS if config.compile != "off" else 0)
    only_steps = config.replace(
        steps=warmup + steps, epochs=None, time_budget_s=None, eval_every_steps=None
    )
    return _execute(only_steps, _Hooks(None, None, 0), None, False, evaluate=False)


@dataclass(frozen=True)
class _Hooks:
    on_eval: OnEval | None
    on_probe: OnProbe | None
    probe_steps: int


def _execute(
    config: TrainConfig,
    hooks: _Hooks,
    resume_state: dict[str, Any] | None,
    progress_bar: bool,
    *,
    evaluate: bool,
) -> RunResult:
    started = time.perf_counter()
    device = resolve_device(config.device)
    _forget_earlier_compiles()
    memory = MemoryMeter(device)
    run: Run | None = None
    status, error = "ok", None
    try:
        run = build_run(config, device)
        run.memory, run.throughput = memory, ThroughputMeter(device, run.warmup_steps)
        if resume_state is not None:
            load_state(run, resume_state)
        _loop(run, hooks, progress_bar, evaluate=evaluate)
    except TunerError:
        memory.close()
        raise
    except Exception as exc:  # a failing run is a result; the traceback is dropped here
        status, error = _classify(exc)
    result = _result(run, status, error, started, device, memory)
    memory.close()
    # The run's tensors (a failed step's went with the exception) and then CUDA's cached blocks:
    # a later process sharing the GPU (a Ray trial beside a calibration probe) needs them. A
    # successful CPU run skips it: its gc.collect costs 0.2 s and frees nothing another needs.
    del run
    if status != "ok" or device.type == "cuda":
        _release()
    return result


def _forget_earlier_compiles() -> None:
    """Start as a fresh process would: drop what earlier runs in this process compiled.

    Dynamo's caches keep an earlier run's compiled graphs alive after the run ends, and with
    them max-autotune's CUDA-graph memory pool, which ``empty_cache`` cannot free: the next run's
    reserved peak would include it (and runs of one model class would count against dynamo's
    recompile limit, then fall back to eager). Costs nothing when nothing was compiled.
    """
    torch._dynamo.reset()


def _loop(run: Run, hooks: _Hooks, bar: bool, *, evaluate: bool) -> None:
    from tqdm.auto import tqdm

    with tqdm(total=run.planned_steps, initial=run.step, disable=not bar, unit="step") as progress:
        clock = _TrainClock(run)
        run.throughput.start()
        try:
            stopped = _steps(run, hooks, progress, clock, evaluate=evaluate)
        finally:  # a run that fails (diverged at a flush) keeps the time it trained
            clock.lap()
    if evaluate and not stopped and (run.val_accuracy is None or not _eval_due(run)):
        _evaluate_and_report(run, hooks.on_eval)


def _steps(run: Run, hooks: _Hooks, progress: Any, clock: _TrainClock, *, evaluate: bool) -> bool:
    """Train until the run is finished or a hook stops it (then True)."""
    batches, losses = _batches(run), []
    count_at, taken = _memory_step(run), 0
    stopped = probed = False
    while not run.finished():
        tick = time.perf_counter()
        run.first_step_unix_s = run.first_step_unix_s or time.time()
        images, labels = next(batches)
        waited = time.perf_counter() - tick
        taken += 1
        losses.append(_step(run, images, labels, count_memory=taken == count_at))
        run.step += 1
        run.throughput.step(labels.shape[0], waited)
        progress.update(1)
        if len(losses) >= WINDOW_STEPS:
            _flush(run, losses, progress)
        clock.lap()
        if hooks.on_probe and not probed and _probe_due(run, hooks, taken, count_at, evaluate):
            _flush(run, losses, progress)
            probed = True
            with clock.outside():
                stopped = _probe_says_stop(run, hooks.on_probe)
            if stopped:
                break
        if evaluate and _eval_due(run):
            _flush(run, losses, progress)
            with clock.outside():
                stopped = _evaluate_and_report(run, hooks.on_eval)
            if stopped:
                break
    _flush(run, losses, progress)
    run.throughput.pause()
    return stopped


class _TrainClock:
    """``run.train_time_s``: the loop's wall time except evaluations and probes.

    Every moment between them counts, not just each step's own span: on a GPU a step only queues
    work, and the sync that waits for it (a loss flush, a window edge) is training time too.
    Timing steps alone missed the catch-up at flushes that fall outside a step, and so favoured
    whatever lets the host run further ahead (``non_blocking``, the prefetcher).
    """

    def __init__(self, run: Run) -> None:
        self.run, self.last = run, time.perf_counter()

    def lap(self) -> None:
        now = time.perf_counter()
        self.run.train_time_s += now - self.last
        self.last = now

    @contextmanager
    def outside(self) -> Iterator[None]:
        """Time inside the block is not training (an evaluation, a probe's report)."""
        self.lap()
        try:
            yield
        finally:
            self.last = time.perf_counter()


def _probe_due(run: Run, hooks: _Hooks, taken: int, count_at: int, evaluate: bool) -> bool:
    """After memory was counted: ``probe_steps`` later, or before the first evaluation or the
    end, whichever comes first (an evaluation must never report an unchecked run)."""
    if taken < count_at:
        return False
    return taken >= count_at + hooks.probe_steps or (evaluate and _eval_due(run)) or run.finished()


def _probe_says_stop(run: Run, on_probe: OnProbe) -> bool:
    """Close the open throughput window, show the result so far, reopen."""
    run.throughput.pause()
    stop = bool(on_probe(_result(run, "ok", None, None, run.device, run.memory)))
    run.throughput.resume()
    return stop


def _memory_step(run: Run) -> int:
    """Which step of this run counts memory: the last warm-up step (never past the run's end)."""
    left = run.planned_steps - run.step if run.planned_steps else run.warmup_steps
    return max(1, min(run.warmup_steps, left))


def _batches(run: Run) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Batches forever; a new pass over the loader starts at each epoch boundary."""
    while True:
        remaining = run.steps_per_epoch - run.step % run.steps_per_epoch
        for i, batch in enumerate(run.train_batches):
            yield batch
            if i + 1 >= remaining:
                break


def _step(
    run: Run, images: torch.Tensor, labels: torch.Tensor, *, count_memory: bool = False
) -> torch.Tensor:
    cfg = run.config
    x, y = _to_input(run, images, labels)
    lr = lr_at(cfg, run.progress(ahead=1))
    for group in run.optimizer.param_groups:
        group["lr"] = lr
    with run.autocast(), run.memory.activations(run.model, enabled=count_memory):
        loss = run.criterion(run.forward(x), y)
    run.scaler.scale(loss).backward()
    if cfg.grad_clip_norm is not None:
        run.scaler.unscale_(run.optimizer)
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), cfg.grad_clip_norm)
    run.scaler.step(run.optimizer)
    run.scaler.update()
    run.optimizer.zero_grad(set_to_none=cfg.set_to_none)
    if count_memory:
        run.memory.record_state(run.model, run.optimizer, keeps_grads=not cfg.set_to_none)
    return loss.detach()


def _to_input(run: Run, images: torch.Tensor, labels: torch.Tensor):
    if images.is_floating_point():  # the prefetcher already moved and normalized it
        return images, labels
    non_blocking = bool(run.effective["non_blocking"])
    images = images.to(run.device, non_blocking=non_blocking)
    labels = labels.to(run.device, non_blocking=non_blocking)
    x = normalize(images, run.mean, run.std, channels_last=run.config.channels_last)
    return x, labels


def _flush(run: Run, losses: list[torch.Tensor], progress: Any) -> None:
    """Move the window's losses to the host (one sync); NaN/inf means the run diverged."""
    if not losses:
        return
    values = torch.stack(losses).float().tolist()
    losses.clear()
    mean = sum(values) / len(values)
    if not all(v == v and abs(v) != float("inf") for v in values):
        raise Diverged(f"training loss became {mean} by step {run.step}; lower lr or clip grads.")
    run.loss_curve.append((run.step, mean))
    progress.set_postfix(loss=f"{mean:.3f}", refresh=False)


def _eval_due(run: Run) -> bool:
    every = run.config.eval_every_steps or run.steps_per_epoch
    return run.step % every == 0


def _evaluate_and_report(run: Run, on_eval: OnEval | None) -> bool:
    run.throughput.pause()
    run.val_accuracy, run.val_loss, run.val_images = evaluate(run)
    target = run.config.target_accuracy
    if target is not None and run.time_to_target_s is None and run.val_accuracy >= target:
        run.time_to_target_s = run.train_time_s
    stop = False
    if on_eval is not None:
        partial = _result(run, "ok", None, None, run.device, run.memory)
        stop = bool(on_eval(Progress(run.step, run.epoch, partial, lambda: make_state(run))))
    run.throughput.resume()
    return stop


@torch.no_grad()
def evaluate(run: Run) -> tuple[float, float, int]:
    """Top-1 accuracy, mean cross-entropy (no label smoothing) and the number of images, on the
    validation split.

    Uses the uncompiled model (evaluation speed is not measured; this avoids recompiles).
    """
    run.model.eval()
    correct, loss_sum, seen = 0, torch.zeros((), device=run.device), 0
    for i, (images, labels) in enumerate(run.data.val_loader):
        if run.config.max_eval_batches is not None and i >= run.config.max_eval_batches:
            break
        x, y = _to_input(run, images, labels)
        with run.autocast():
            logits = run.model(x)
        loss_sum += F.cross_entropy(logits.float(), y, reduction="sum")
        correct += int((logits.argmax(dim=1) == y).sum())
        seen += y.shape[0]
    run.model.train()
    return correct / max(seen, 1), float(loss_sum) / max(seen, 1), seen


def _classify(exc: BaseException) -> tuple[str, str]:
    message = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:500]
    if isinstance(exc, Diverged):
        return "diverged", str(exc)
    if isinstance(exc, UnreadableImage):  # the file's name, not the loader worker's traceback
        return "error", exc.line[:500]
    text = str(exc).lower()
    if isinstance(exc, torch.OutOfMemoryError | MemoryError) or (
        "out of memory" in text or "can't allocate memory" in text
    ):
        return "oom", message
    return "error", message


def _release() -> None:
    """Return a finished run's memory: collect cycles, then CUDA's cached blocks."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _result(
    run: Run | None,
    status: str,
    error: str | None,
    started: float | None,
    device: torch.device,
    memory: MemoryMeter,
) -> RunResult:
    fields: dict[str, Any] = dict(status=status, error=error, **environment(device))
    fields.update(memory.read())
    if started is not None:
        fields["wall_time_s"] = time.perf_counter() - started
    if run is not None:
        if run.throughput is not None:
            fields.update(run.throughput.summary())
        fields.update(_run_fields(run))
    return RunResult(**fields)


def _run_fields(run: Run) -> dict[str, Any]:
    curve = list(run.loss_curve)
    return {
        "val_accuracy": run.val_accuracy,
        "val_loss": run.val_loss,
        "val_images": run.val_images,
        "train_loss": curve[-1][1] if curve else None,
        "train_loss_curve": curve,
        "time_to_target_s": run.time_to_target_s,
        "steps": run.step,
        "epochs": run.epoch,
        "images_seen": run.step * run.config.batch_size,
        "train_time_s": run.train_time_s,
        "first_step_unix_s": run.first_step_unix_s,
        "skipped_images": run.data.skipped_images,
        "effective": dict(run.effective, warmup_steps=run.warmup_steps),
        "notes": list(run.notes),
        "num_parameters": sum(p.numel() for p in run.model.parameters()),
        "config": run.config.to_dict(),
    }
