"""``jpeg_digits``: the shipped data-bound workload, real JPEG files in an image folder, built
once into the user cache (nothing downloaded): scikit-learn's 8x8 digits drawn large, coloured,
at a random place and scale over crops of its two sample photos.

Why these sizes: at ``IMAGE_SIDE`` px a file costs the host about 0.6 ms to decode and crop
(bench/loader_bench.py), about a small CNN's step per image at 64 px on a CPU, so with
``num_workers=0`` the step waits for data about 40 % of its time: the loader knobs can win.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from tuner.engine.digits import load_digits
from tuner.errors import TunerError
from tuner.usercache import CACHE_DIR_ENV, cache_dir

__all__ = ["IMAGE_SIDE", "VERSION", "jpeg_digits_folder"]

IMAGE_SIDE = 256
JPEG_QUALITY = 90
VERSION = 2  # bumped when the files would come out differently: a new folder is built
_VAL_FRACTION = 0.2
_SEED = 1234  # the split and the drawing, the same on every machine (the bytes follow Pillow's)


def jpeg_digits_folder() -> Path:
    """The image folder, built on first use. It counts only with its completion mark (written
    last: a half build is rebuilt, never read); two builders each rename their own folder into
    place, the second dropping its copy (no lock needed)."""
    final = cache_dir() / f"jpeg_digits-v{VERSION}"
    if _complete(final):
        return final
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".jpeg_digits-", dir=final.parent))
    except OSError as exc:
        raise _unwritable(final, exc) from None
    try:
        _draw_all(scratch)
        (scratch / _MARK).write_text(f"{VERSION}\n")
        if final.exists() and not _complete(final):  # damaged: replaced, not read
            shutil.rmtree(final, ignore_errors=True)
        os.rename(scratch, final)
    except OSError as exc:
        if not _complete(final):  # not another process's complete copy in place
            raise _unwritable(final, exc) from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return final


_MARK = ".complete"  # written after every file: what makes a folder the workload


def _complete(folder: Path) -> bool:
    try:
        return (folder / _MARK).read_text().strip() == str(VERSION)
    except OSError:
        return False


def _unwritable(final: Path, exc: OSError) -> TunerError:
    return TunerError(
        f"cannot build the jpeg_digits files in {final.parent} ({exc.strerror or exc}); point "
        f"{CACHE_DIR_ENV} at a writable folder."
    )


def _draw_all(root: Path) -> None:
    from PIL import Image
    from sklearn.datasets import load_sample_images

    digits_images, digits_target = load_digits()
    photos = [Image.fromarray(photo) for photo in load_sample_images().images]
    rng = np.random.default_rng(_SEED)
    order = rng.permutation(len(digits_target))
    n_val = int(len(order) * _VAL_FRACTION)
    for rank, index in enumerate(order):
        split = "val" if rank < n_val else "train"
        label = int(digits_target[index])
        folder = root / split / str(label)
        folder.mkdir(parents=True, exist_ok=True)
        image = _draw(digits_images[index], photos[rank % len(photos)], rng)
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
