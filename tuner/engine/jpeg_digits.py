"""``jpeg_digits``: the shipped data-bound workload, real JPEG files in an image folder.

Nothing is downloaded: scikit-learn's embedded 8x8 handwritten digits are drawn large, in a
colour, at a random place and scale, over a random crop of the two photos scikit-learn ships
(``china.jpg``, ``flower.jpg``), and saved as JPEG files in the layout of ``imagefolder:PATH``
(``train/<class>/*.jpg``, ``val/<class>/*.jpg``). Built once, on first use, into the user cache
folder; the data then goes through the same ``imagefolder`` path a user's folder takes.

Why these sizes: at ``IMAGE_SIDE`` px a file costs the host about a millisecond to decode and
crop, more than a small CNN's step per image at 64 px on a CPU, so with ``num_workers=0`` the
step waits for data most of its time (bench/loader_bench.py measures it): a workload on which
the loader knobs have something to win.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from tuner.usercache import cache_dir

__all__ = ["IMAGE_SIDE", "VERSION", "jpeg_digits_folder"]

IMAGE_SIDE = 256
JPEG_QUALITY = 90
VERSION = 2  # bumped when the files would come out differently: a new folder is built
_VAL_FRACTION = 0.2
_SEED = 1234  # the split and the drawing: the same files on every machine


def jpeg_digits_folder() -> Path:
    """The image folder, built on first use (a few seconds) and reused after.

    Two processes building it at once each build in a folder of their own and rename it into
    place; the second rename finds the folder there and drops its copy (no lock needed).
    """
    final = cache_dir() / f"jpeg_digits-v{VERSION}"
    if (final / "val").is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".jpeg_digits-", dir=final.parent))
    try:
        _draw_all(scratch)
        os.rename(scratch, final)
    except OSError:
        if not (final / "val").is_dir():  # not another process's copy in place: a real error
            raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return final


def _draw_all(root: Path) -> None:
    from PIL import Image
    from sklearn.datasets import load_digits, load_sample_images

    digits = load_digits()
    photos = [Image.fromarray(photo) for photo in load_sample_images().images]
    rng = np.random.default_rng(_SEED)
    order = rng.permutation(len(digits.target))
    n_val = int(len(order) * _VAL_FRACTION)
    for rank, index in enumerate(order):
        split = "val" if rank < n_val else "train"
        label = int(digits.target[index])
        folder = root / split / str(label)
        folder.mkdir(parents=True, exist_ok=True)
        image = _draw(digits.images[index], photos[rank % len(photos)], rng)
        image.save(folder / f"{index:04d}.jpg", quality=JPEG_QUALITY)
    (root / "README.txt").write_text(
        "tuner's jpeg_digits: scikit-learn's digits drawn over its sample photos "
        f"(tuner/engine/jpeg_digits.py, version {VERSION}). Safe to delete: rebuilt on use.\n"
    )


def _draw(digit: np.ndarray, photo: object, rng: np.random.Generator) -> object:
    """One image: a digit (0..16 levels) drawn over a random crop of a photo."""
    from PIL import Image

    width, height = photo.size  # type: ignore[attr-defined]
    left = int(rng.integers(0, width - IMAGE_SIDE))
    top = int(rng.integers(0, height - IMAGE_SIDE))
    background = photo.crop((left, top, left + IMAGE_SIDE, top + IMAGE_SIDE))  # type: ignore[attr-defined]
    if rng.random() < 0.5:
        background = background.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    side = int(rng.integers(IMAGE_SIDE * 7 // 10, IMAGE_SIDE * 19 // 20))
    # Bicubic from 8x8 blurs the strokes; a steeper ramp gives them edges again.
    ramp = np.clip((digit / 16 - 0.25) * 2.5, 0, 1)
    stroke = Image.fromarray((ramp * 255).astype(np.uint8)).resize(
        (side, side), Image.Resampling.BICUBIC
    )
    x, y = (int(v) for v in rng.integers(0, IMAGE_SIDE - side + 1, 2))
    # A colour that stands out from the background under it: dark on light, light on dark.
    under = np.asarray(background.crop((x, y, x + side, y + side))).mean()
    low, high = (0, 90) if under > 127 else (165, 256)
    colour = tuple(int(c) for c in rng.integers(low, high, 3))
    background.paste(Image.new("RGB", (side, side), colour), (x, y), stroke)
    return background
