"""The input pipeline alone (issue 31): tuner's train loader of the shipped ``jpeg_digits`` files
at each loader setting, against the decode limit and a plain DataLoader written out by hand.

- **Loader settings**: ``tuner.engine.data.build_data`` (the loader a trial trains from:
  ImageFolder, RandomResizedCrop + flip in the decoder's own library, collate) at every
  combination of ``num_workers`` (0 .. cores), ``decoder`` (pil, decode_jpeg) and, with workers,
  ``prefetch_factor`` (2, 4); each timed over ``--batches`` batches after one untimed (the
  workers' start-up), no training.
- **Decode limit**: the decoder alone (read the file, decode it to RGB; no crop, no collate) in
  one process per core, every core busy: images/s. What no loader of these files can beat.
- **Work limit**: the same with the train transforms (crop, resize, flip) after the decode, no
  DataLoader: what a loader doing this work could reach with no overhead at all.
- **Hand-written**: ``torch.utils.data.DataLoader`` over ``torchvision.datasets.ImageFolder``
  with torchvision's own PIL loader and the classic transforms (RandomResizedCrop, flip,
  PILToTensor), as a tutorial writes it, with ``num_workers`` = cores.

Every arm runs ``--rounds`` times, interleaved (A, B, C, A, B, C, ...), in this process; the
report gives each arm's median [min-max] images/s and the ratios the issue asks for.

    PYTHONPATH=. python bench/loader_bench.py --rounds 5
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from tuner.config import TrainConfig
from tuner.engine.data import build_data
from tuner.engine.images import DECODERS, train_transforms
from tuner.engine.jpeg_digits import jpeg_digits_folder

OUT = Path(__file__).resolve().parent.parent / "reports" / "benchmarks"
BATCH, SIZE = 64, 64  # input_space's CPU workload: batch 64 at 64 px
CPU = torch.device("cpu")


def _tuner_loader(batches: int, **settings: Any) -> float:
    config = TrainConfig(data="jpeg_digits", img_size=SIZE, batch_size=BATCH, **settings)
    loader = build_data(config, CPU).train_loader
    return _time(loader, batches)


def _hand_written(batches: int, workers: int) -> float:
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    tf = transforms.Compose([transforms.RandomResizedCrop(SIZE), transforms.RandomHorizontalFlip(),
                             transforms.PILToTensor()])  # fmt: skip
    data = datasets.ImageFolder(str(jpeg_digits_folder() / "train"), transform=tf)
    loader = DataLoader(data, batch_size=BATCH, shuffle=True, num_workers=workers, drop_last=True)
    return _time(loader, batches)


def _time(loader: Any, batches: int) -> float:
    """Images/s over ``batches`` batches after one untimed (its workers' start-up)."""
    it = iter(loader)
    next(it)
    started, images = time.perf_counter(), 0
    for _ in range(batches):
        images += int(next(it)[1].shape[0])
    seconds = time.perf_counter() - started
    del it
    return images / seconds


def _decode_files(job: tuple[str, bool, list[str]]) -> int:
    torch.set_num_threads(1)
    decoder, augment, files = job
    tf = train_transforms(SIZE)  # what the loader's Dataset applies, without the Dataset
    for file in files:
        image = DECODERS[decoder](file)
        if augment:
            tf(image)
    return len(files)


def _limit(decoder: str, cores: int, images: int, *, augment: bool = False) -> float:
    """The decoder alone (``augment``: and the train transforms) on every core: ``images``
    files split over ``cores`` processes, no DataLoader."""
    files = sorted(str(f) for f in (jpeg_digits_folder() / "train").glob("*/*.jpg"))[:images]
    chunks = [(decoder, augment, files[i::cores]) for i in range(cores)]
    with multiprocessing.get_context("fork").Pool(cores) as pool:
        pool.map(_decode_files, [(decoder, augment, files[:cores])] * cores)  # warm: imports
        started = time.perf_counter()
        done = sum(pool.map(_decode_files, chunks))
    return done / (time.perf_counter() - started)


def _arms(cores: int, batches: int) -> dict[str, Callable[[], float]]:
    arms: dict[str, Callable[[], float]] = {}
    for decoder in ("pil", "decode_jpeg"):
        arms[f"decode limit ({decoder}, {cores} cores)"] = lambda d=decoder: _limit(
            d, cores, batches * BATCH
        )
        arms[f"work limit: decode + transforms ({decoder}, {cores} cores)"] = lambda d=decoder: (
            _limit(d, cores, batches * BATCH, augment=True)
        )
        for workers in range(cores + 1):
            factors = (None,) if workers == 0 else (None, 4)
            for factor in factors:
                name = f"tuner: num_workers={workers} decoder={decoder}"
                name += f" prefetch_factor={factor}" if factor else ""
                arms[name] = lambda w=workers, d=decoder, f=factor: _tuner_loader(
                    batches, num_workers=w, decoder=d, prefetch_factor=f,
                    persistent_workers=False,
                )  # fmt: skip
    arms[f"hand-written DataLoader (PIL, num_workers={cores})"] = lambda: _hand_written(
        batches, cores
    )
    return arms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--label", default="cpu")
    args = parser.parse_args()
    jpeg_digits_folder()  # built before any clock runs
    arms = _arms(args.cores, args.batches)
    runs: dict[str, list[float]] = {name: [] for name in arms}
    for round_ in range(args.rounds):
        for name, arm in arms.items():
            runs[name].append(arm())
        print(f"round {round_ + 1}/{args.rounds} done", flush=True)
    _write(args, runs)


def _write(args: argparse.Namespace, runs: dict[str, list[float]]) -> None:
    medians = {name: statistics.median(values) for name, values in runs.items()}
    limits = {k: v for k, v in medians.items() if k.startswith("decode limit")}
    tuner = {k: v for k, v in medians.items() if k.startswith("tuner:")}
    best = max(tuner, key=tuner.get)
    limit = max(limits.values())
    hand = next(v for k, v in medians.items() if k.startswith("hand-written"))
    work = max(v for k, v in medians.items() if k.startswith("work limit"))
    summary = {
        "best_setting": best,
        "best_images_per_second": tuner[best],
        "decode_limit_images_per_second": limit,
        "work_limit_images_per_second": work,
        "best_over_decode_limit": tuner[best] / limit,
        "best_over_work_limit": tuner[best] / work,
        "best_over_hand_written": tuner[best] / hand,
    }
    record = {"label": args.label, "cores": args.cores, "rounds": args.rounds,
              "batches": args.batches, "batch_size": BATCH, "img_size": SIZE,
              "torch": torch.__version__, "runs": runs, "summary": summary}  # fmt: skip
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"loader_{args.label}.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [
        f"# The input pipeline alone: jpeg_digits at {SIZE} px, batch {BATCH} ({args.label})",
        "",
        f"{args.cores} cores, {args.rounds} interleaved rounds of {args.batches} timed batches "
        f"each (after one untimed); torch {torch.__version__}. `PYTHONPATH=. python "
        f"bench/loader_bench.py --rounds {args.rounds}`.",
        "",
        "| arm | images/s median [min-max] |",
        "|---|---|",
    ]
    for name, values in runs.items():
        lines.append(f"| {name} | {medians[name]:,.0f} [{min(values):,.0f}-{max(values):,.0f}] |")
    lines += [
        "",
        f"Best tuner setting: **{best}**, {tuner[best]:,.0f} images/s: "
        f"{summary['best_over_decode_limit']:.0%} of the decode limit ({limit:,.0f} images/s, "
        f"the faster decoder alone on every core), "
        f"{summary['best_over_work_limit']:.0%} of the work limit ({work:,.0f} images/s: "
        f"decode and the train transforms on every core, no DataLoader) and "
        f"{summary['best_over_hand_written']:.2f}x the hand-written DataLoader ({hand:,.0f} "
        "images/s).",
    ]
    (OUT / f"loader_{args.label}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
