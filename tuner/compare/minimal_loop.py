"""A minimal training loop, written without the engine: the reference of ``tuner bench --verify``.

Plain PyTorch as a tutorial would write it: a timm model, AdamW, cross-entropy, autocast for
bf16, one fixed random batch on the device, the device synchronized around the timed steps after
untimed warm-up steps. It imports nothing from :mod:`tuner`, so a slowdown (or a mis-measurement)
in the engine cannot hide in it (``-m`` loads ``tuner.compare``'s light core, which imports no
torch and sets nothing). Run as a fresh process (``--help``), it prints one JSON line:
``images_per_second`` over the timed steps, and the seconds they took.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence

import timm
import torch


def main(argv: Sequence[str] | None = None) -> None:
    args = _parse(argv)
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = _create(args).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    criterion = torch.nn.CrossEntropyLoss()
    x = torch.randn(args.batch_size, 3, args.img_size, args.img_size, device=device)
    y = torch.randint(0, args.num_classes, (args.batch_size,), device=device)

    def step() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.amp == "bf16"):
            loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    for _ in range(args.warmup_steps):
        step()
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    _synchronize(device)
    seconds = time.perf_counter() - start
    rate = args.batch_size * args.steps / seconds
    print(json.dumps({"images_per_second": rate, "seconds": seconds, "steps": args.steps}))


def _create(args: argparse.Namespace) -> torch.nn.Module:
    kwargs = json.loads(args.model_kwargs)
    try:  # ViTs take the input size; convolutional nets take any size and no such argument
        return timm.create_model(
            args.model, num_classes=args.num_classes, img_size=args.img_size, **kwargs
        )
    except TypeError:
        return timm.create_model(args.model, num_classes=args.num_classes, **kwargs)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--model-kwargs", default="{}", help="JSON object for timm.create_model")
    parser.add_argument("--img-size", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--num-classes", type=int, required=True)
    parser.add_argument("--amp", choices=["off", "bf16"], default="off")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--device", default="cpu")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main()
