"""The training loop: ``train(config) -> RunResult``, and ``short_run`` (steps only, no
evaluation: what the speed probes measure). The parts were built once; only
:class:`~tuner.engine.state.RunState` changes. A failing run returns a result. Data-parallel
workers stay in step: every decision is made from the step count or a value all agreed on.
"""

from __future__ import annotations

import dataclasses
import gc
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch._dynamo
import torch.nn.functional as F

from tuner.config import TrainConfig
from tuner.engine.build import RunParts, build_parts, resolve_device, warmup_steps_of
from tuner.engine.data import normalize
from tuner.engine.distributed import World
from tuner.engine.images import UnreadableImage
from tuner.engine.meters import (
    WINDOW_STEPS,
    MemoryMeter,
    environment,
    loader_images_per_second,
)
from tuner.engine.result import RunResult, bound_of, time_budget_note
from tuner.engine.state import Progress, RunState, load_state, make_state
from tuner.errors import TunerError, error_line

__all__ = ["Diverged", "batches", "failure", "short_run", "take_step", "train", "what_ran"]

OnEval = Callable[[Progress], Any]
OnFeasibility = Callable[[RunResult], bool]  # the search's feasibility check: the first steps
_Hook = OnEval | OnFeasibility  # what _report shows the run to: a Progress, or a bare result


class Diverged(RuntimeError):
    """The training loss became NaN or infinite."""


def train(
    config: TrainConfig,
    *,
    on_eval: OnEval | None = None,
    resume_state: dict[str, Any] | None = None,
    progress_bar: bool = False,
    on_feasibility: OnFeasibility | None = None,
    feasibility_steps: int = 5,
    dataparallel: bool = False,
) -> RunResult:
    """One measured training run of ``config`` (in a process group, every worker calls it and
    gets the global result); OOM / NaN / crashes come back as its ``status``.

    Args:
        on_eval: called with a :class:`Progress` after each evaluation; ``True`` stops the run
            (rank 0's answer counts).
        resume_state: a ``Progress.state_dict()`` to continue from.
        on_feasibility: the feasibility check, called once (not on resume) with the result
            after the warm-up and ``feasibility_steps`` more steps; ``True`` stops the run.
        dataparallel: ``torch.nn.DataParallel`` over every visible GPU in this one process
            (what DDP replaced: ``tuner ablate`` compares the two).

    Raises:
        TunerError: bad input, found before training starts.
    """
    on_feasibility = None if resume_state is not None else on_feasibility
    hooks = _Hooks(on_eval, on_feasibility, feasibility_steps, evaluate=True)
    return _execute(config, hooks, resume_state, progress_bar, dataparallel=dataparallel)


def short_run(
    config: TrainConfig, *, steps: int = 10, time_limit_s: float | None = None
) -> RunResult:
    """``config.warmup_steps + steps`` training steps, no evaluation, within ``time_limit_s``
    of training (TunerError: bad input)."""
    if steps < 1:
        raise TunerError(f"a short run's steps={steps} must be at least 1.")
    only_steps = config.replace(
        steps=warmup_steps_of(config) + steps,
        epochs=None,
        images=None,
        time_budget_s=time_limit_s,
        eval_every_steps=None,
        eval_every_images=None,
        eval_every_s=None,
    )
    return _execute(only_steps, _Hooks(None, None, 0, evaluate=False), None, False)


@dataclass(frozen=True)
class _Hooks:
    on_eval: OnEval | None
    on_feasibility: OnFeasibility | None
    feasibility_steps: int
    evaluate: bool


def _execute(
    config: TrainConfig,
    hooks: _Hooks,
    resume_state: dict[str, Any] | None,
    bar: bool,
    *,
    dataparallel: bool = False,
) -> RunResult:
    started = time.perf_counter()
    device = resolve_device(config.device)
    if config.torch_threads is not None:  # the threads a search measured with (process-wide)
        torch.set_num_threads(config.torch_threads)
    # Start as a fresh process would: dynamo's caches keep an earlier run's compiled graphs
    # alive, and with them max-autotune's CUDA-graph pool, which empty_cache cannot free (the
    # next run's reserved peak would include it, and runs of one model class would count
    # against dynamo's recompile limit). Costs nothing when nothing was compiled.
    torch._dynamo.reset()
    memory = MemoryMeter(device)  # before the build: its peak counters are reset here
    parts, state = None, RunState(run_started=started)
    status, error, where = "ok", None, None
    try:
        parts = build_parts(config, device, memory, dataparallel=dataparallel)
        if resume_state is not None:
            state = load_state(parts, resume_state)
            state.run_started = started  # this segment's wall time, in every result it makes
        _train_loop(parts, state, hooks, bar)
    except TunerError:
        raise
    except Exception as exc:  # a failing run is a result; its traceback goes with it as text
        status, error = failure(exc)
        where = traceback.format_exc()
    result = dataclasses.replace(
        _result(parts, state, status, error, device, memory), error_traceback=where
    )
    # The run's tensors (a failed step's went with the exception) and then CUDA's cached blocks:
    # a later process sharing the GPU (a Ray trial beside a calibration run) needs them. A
    # successful CPU run skips it: its gc.collect costs 0.2 s and frees nothing another needs.
    del parts, state
    if status != "ok" or device.type == "cuda":
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return result


def _train_loop(parts: RunParts, state: RunState, hooks: _Hooks, bar: bool) -> None:
    """Train until the budget is used or a hook stops the run, then evaluate once more."""
    from tqdm.auto import tqdm

    start = state.step
    memory_at = start + _memory_step(parts, start)  # the last warm-up step counts memory
    check_at = memory_at + hooks.feasibility_steps if hooks.on_feasibility else None
    stream = batches(parts, state)
    progress = tqdm(total=parts.schedule.planned_steps, initial=start, disable=not bar, unit="step")
    stop = False
    state.setup_time_s = time.perf_counter() - state.run_started
    state.start_clock()  # before the meter: the training clock covers every moment it times
    parts.throughput.start()
    try:
        while not stop and _progress(parts, state) < 1.0:  # the budget: steps, epochs or time
            _step(parts, state, stream, start, count_memory=state.step + 1 == memory_at)
            progress.update(1)
            if len(state.losses) >= WINDOW_STEPS:  # one sync per window: loss, divergence
                _flush(parts, state, progress)
            state.lap()
            eval_due = hooks.evaluate and _eval_due(parts, state)
            if check_at is not None and _check_due(parts, state, memory_at, check_at, eval_due):
                check_at = None  # once
                stop = _pause(parts, state, progress, hooks.on_feasibility, evaluate=False)
            if eval_due and not stop:
                stop = _pause(parts, state, progress, hooks.on_eval, evaluate=True)
        _flush(parts, state, progress)
        parts.throughput.pause()
    finally:  # a run that fails (diverged at a flush) keeps the time it trained
        state.lap()
        progress.close()
        stream.close()  # its loader's workers and prefetch thread end here
    if hooks.evaluate and not stop:
        _last_evaluation(parts, state, hooks.on_eval)


def _step(
    parts: RunParts, state: RunState, stream: Iterator[Any], start: int, *, count_memory: bool
) -> None:
    state.first_step_unix_s = state.first_step_unix_s or time.time()
    lr = parts.schedule.lr_at(_progress(parts, state, ahead=1))
    waited, images = take_step(parts, state, stream, lr, count_memory=count_memory)
    parts.throughput.step(state.step - start, images, waited)


def _check_due(
    parts: RunParts, state: RunState, memory_at: int, check_at: int, eval_due: bool
) -> bool:
    """After memory was counted, before any evaluation (none reports an unchecked run) or the
    run's end."""
    if state.step < memory_at:
        return False
    return state.step >= check_at or eval_due or _progress(parts, state) >= 1.0


def _last_evaluation(parts: RunParts, state: RunState, on_eval: OnEval | None) -> None:
    """The final evaluation (unless just made), then the loader alone (after the run: no step
    waits on it)."""
    if state.evaluated_step != state.step:
        _score(parts, state)
        planned = parts.schedule.planned_steps
        if on_eval is not None:
            cut = planned is not None and state.step < planned
            _report(parts, state, on_eval, evaluated=True, cut=cut)
    if not parts.data.on_device:
        state.loader_images_per_second = loader_images_per_second(
            parts.data.train_loader, parts.world
        )


def _progress(parts: RunParts, state: RunState, ahead: int = 0) -> float:
    return parts.schedule.progress(state.step + ahead, _clock(parts, state))


def _clock(parts: RunParts, state: RunState) -> float:
    """The clock decisions go by: data-parallel workers go by their agreed clock."""
    return state.train_time_s if parts.world.size == 1 else state.shared_time_s


def _memory_step(parts: RunParts, start: int) -> int:
    """The step that counts memory: the last warm-up step (never past the run's end)."""
    planned = parts.schedule.planned_steps
    left = planned - start if planned else parts.effective.warmup_steps
    return max(1, min(parts.effective.warmup_steps, left))


def batches(parts: RunParts, state: RunState) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Batches forever, each epoch a new pass over its shuffle."""
    per_epoch = parts.schedule.steps_per_epoch
    while True:
        epoch, done = divmod(state.step, per_epoch)
        if parts.data.sampler is not None:
            parts.data.sampler.set_epoch(epoch)
        for i, batch in enumerate(parts.train_batches):
            yield batch
            if i + 1 >= per_epoch - done:
                break


def take_step(
    parts: RunParts, state: RunState, batches: Iterator[Any], lr: float, *, count_memory: bool
) -> tuple[float, int]:
    """One step on the next batch; the seconds waited for it, and its images."""
    cfg, optimizer, scaler = parts.config, parts.optimizer, parts.scaler
    tick = time.perf_counter()
    images, labels = next(batches)
    waited = time.perf_counter() - tick
    x, y = _to_input(parts, images, labels, prefetched=parts.effective.prefetch != "off")
    for group in optimizer.param_groups:
        group["lr"] = lr
    with parts.autocast(), parts.memory.activations(parts.model, enabled=count_memory):
        loss = parts.criterion(parts.forward(x), y)
    scaler.scale(loss).backward()  # DDP all-reduces (averages) the gradients here
    if cfg.grad_clip_norm is not None:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(parts.model.parameters(), cfg.grad_clip_norm)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=cfg.set_to_none)
    if count_memory:
        parts.memory.record_state(parts.model, optimizer, keeps_grads=not cfg.set_to_none)
    state.losses.append(loss.detach())
    state.step += 1
    return waited, labels.shape[0]


def _to_input(
    parts: RunParts, images: torch.Tensor, labels: torch.Tensor, *, prefetched: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    if prefetched:  # the prefetcher already moved and normalized it
        return images, labels
    non_blocking = parts.effective.non_blocking
    images = images.to(parts.device, non_blocking=non_blocking)
    labels = labels.to(parts.device, non_blocking=non_blocking)
    x = normalize(images, parts.mean, parts.std, channels_last=parts.config.channels_last)
    return x, labels


def _flush(parts: RunParts, state: RunState, progress: Any) -> None:
    """The window's losses to the host (one sync), averaged over the workers (NaN/inf:
    diverged); workers agree on their clock here."""
    if not state.losses:
        return
    world = parts.world
    values = [v / world.size for v in world.sum(torch.stack(state.losses).float().tolist())]
    state.losses.clear()
    (state.shared_time_s,) = world.max([state.train_time_s])
    mean = sum(values) / len(values)
    if not all(v == v and abs(v) != float("inf") for v in values):
        raise Diverged(f"training loss became {mean} by step {state.step}; lower lr or clip grads.")
    state.loss_curve.append((state.step, mean))
    progress.set_postfix(loss=f"{mean:.3f}", refresh=False)


def _eval_due(parts: RunParts, state: RunState) -> bool:
    """Whether an evaluation follows: the first step past each multiple of
    ``eval_every_images`` (the k-th of any batch size after the same images) or of
    ``eval_every_s``; every ``eval_every_steps``; else at each epoch's end."""
    cfg = parts.config
    if cfg.eval_every_images:
        seen, batch = state.step * parts.effective.batch_size, parts.effective.batch_size
        return seen // cfg.eval_every_images > (seen - batch) // cfg.eval_every_images
    if cfg.eval_every_s:
        return _clock(parts, state) >= (state.evaluations + 1) * cfg.eval_every_s
    return state.step % (cfg.eval_every_steps or parts.schedule.steps_per_epoch) == 0


def _pause(
    parts: RunParts,
    state: RunState,
    progress: Any,
    hook: _Hook | None,
    *,
    evaluate: bool,
) -> bool:
    """Flush, then, untimed, an evaluation (if ``evaluate``) and the report to ``hook``;
    whether the run stops."""
    _flush(parts, state, progress)
    with _not_training(parts, state):
        if evaluate:
            _score(parts, state)
        return hook is not None and _report(parts, state, hook, evaluated=evaluate)


@contextmanager
def _not_training(parts: RunParts, state: RunState) -> Iterator[None]:
    """Neither the throughput windows nor the clock run inside. The window closes before the
    clock stops and reopens after it restarts: the clock covers every timed moment."""
    parts.throughput.pause()
    with state.clock_stopped():
        yield
    parts.throughput.resume()


def _score(parts: RunParts, state: RunState) -> None:
    """Evaluate (``eval_time_s``); the training time to the target, once reached."""
    started = time.perf_counter()
    state.val_accuracy, state.val_loss, state.val_images = evaluate(parts)
    state.evaluations, state.evaluated_step = state.evaluations + 1, state.step
    state.eval_time_s += time.perf_counter() - started
    target = parts.config.target_accuracy
    if target is not None and state.time_to_target_s is None and state.val_accuracy >= target:
        state.time_to_target_s = state.train_time_s


def _report(
    parts: RunParts, state: RunState, hook: _Hook, *, evaluated: bool, cut: bool = False
) -> bool:
    """The run so far, to ``on_eval`` as a :class:`Progress` (``report_time_s``) or to
    ``on_feasibility`` as a result. A collective: all stop when rank 0's hook says so."""
    result = _result(parts, state, "ok", None, parts.device, parts.memory)
    if not evaluated:
        return parts.world.decide(bool(hook(result)))
    epoch = state.step / parts.schedule.steps_per_epoch
    made = Progress(state.step, epoch, result, lambda: make_state(parts, state), cut=cut)
    started = time.perf_counter()
    stop = parts.world.decide(bool(hook(made)))
    state.report_time_s += time.perf_counter() - started
    return stop


@torch.no_grad()
def evaluate(parts: RunParts) -> tuple[float, float, int]:
    """Top-1 accuracy, mean cross-entropy (no smoothing) and images, on the validation split
    (summed over the workers), with the uncompiled, unwrapped model (no recompiles, no DDP)."""
    parts.model.eval()
    correct, loss_sum, seen = 0, torch.zeros((), device=parts.device), 0
    for images, labels in parts.data.val_loader:
        x, y = _to_input(parts, images, labels)
        with parts.autocast():
            logits = parts.model(x)
        loss_sum += F.cross_entropy(logits.float(), y, reduction="sum")
        correct += int((logits.argmax(dim=1) == y).sum())
        seen += y.shape[0]
    parts.model.train()
    correct, total_loss, seen = parts.world.sum([correct, float(loss_sum), seen])
    return correct / max(seen, 1), total_loss / max(seen, 1), int(seen)


def failure(exc: BaseException) -> tuple[str, str]:
    """A failed run's status (``diverged``, ``oom`` or ``error``) and one line."""
    message = error_line(exc, limit=500)
    if isinstance(exc, Diverged):
        return "diverged", str(exc)
    if isinstance(exc, UnreadableImage):  # the file's name, not the loader worker's traceback
        fix = "; fix or remove it, or --skip-unreadable-images serves the next readable one"
        return "error", exc.line[: 500 - len(fix)] + fix
    text = str(exc).lower()
    if isinstance(exc, torch.OutOfMemoryError | MemoryError) or (
        "out of memory" in text or "can't allocate memory" in text
    ):
        return "oom", message
    return "error", message


def _result(
    parts: RunParts | None,
    state: RunState,
    status: str,
    error: str | None,
    device: torch.device,
    memory: MemoryMeter,
) -> RunResult:
    """The result so far, over every worker (a collective: all call it at the same step)."""
    world = parts.world if parts is not None else World.current()
    fields: dict[str, Any] = dict(status=status, error=error, world_size=world.size)
    fields.update(environment(device), **memory.read(world))
    fields["wall_time_s"] = time.perf_counter() - state.run_started
    if parts is None:
        return RunResult(**fields)
    cfg, curve = parts.config, list(state.loss_curve)
    (train_time_s,) = world.max([state.train_time_s])
    throughput = parts.throughput.summary(world)
    return RunResult(
        **fields,
        **throughput,
        loader_images_per_second=state.loader_images_per_second,
        bound=None if parts.data.on_device else bound_of(throughput.get("data_wait_fraction")),
        val_accuracy=state.val_accuracy,
        val_loss=state.val_loss,
        val_images=state.val_images,
        train_loss=curve[-1][1] if curve else None,
        train_loss_curve=curve,
        time_to_target_s=state.time_to_target_s,
        global_batch_size=cfg.batch_size * world.size,
        steps=state.step,
        planned_steps=parts.schedule.planned_steps,
        epochs=state.step / parts.schedule.steps_per_epoch,
        images_seen=state.step * cfg.batch_size * world.size,
        train_time_s=train_time_s,
        setup_time_s=state.setup_time_s,
        eval_time_s=state.eval_time_s,
        report_time_s=state.report_time_s,
        first_step_unix_s=state.first_step_unix_s,
        skipped_images=parts.data.skipped_images,
        num_parameters=sum(p.numel() for p in parts.model.parameters()),
        **what_ran(parts, _time_budget_cut(parts, state, status)),
    )


def _time_budget_cut(parts: RunParts, state: RunState, status: str) -> list[str]:
    """The note of a run its time budget cut short (a bare ``ok`` would hide it)."""
    planned, budget = parts.schedule.planned_steps, parts.schedule.time_budget_s
    if status != "ok" or not planned or not budget or state.step >= planned:
        return []
    if _clock(parts, state) < budget:  # a hook stopped it (a search's halving), not the clock
        return []
    return [time_budget_note(budget, state.step, planned)]


def what_ran(parts: RunParts, notes: Sequence[str] = ()) -> dict[str, Any]:
    """A result's record of what ran: the effective settings, the notes, the config."""
    effective = dataclasses.asdict(parts.effective)  # the record's fields as the result's keys
    notes = [*parts.notes, *notes]
    return {"effective": effective, "notes": notes, "config": parts.config.to_dict()}
