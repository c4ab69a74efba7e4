"""Image files: ``imagefolder:PATH`` (``PATH/train/<class>/*``, ``PATH/val/<class>/*``), the
shipped ``jpeg_digits`` folder, the two decoders (``config.decoder``), and unreadable files
(named in one line, or skipped and counted)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from tuner.config import TrainConfig
from tuner.errors import TunerError, error_line

__all__ = [
    "DECODERS",
    "SkipUnreadable",
    "UnreadableImage",
    "imagefolder",
    "jpeg_digits",
    "read_image",
    "read_jpeg",
    "train_transforms",
    "val_transforms",
]

IGNORED_SHOWN = 5  # ignored non-image files named in the note; the rest are counted
# What a loader of image files gives: train, val, classes, notes (tuner.engine.data.Splits).
Loaded = tuple[Dataset, Dataset, int, list[str]]


class UnreadableImage(RuntimeError):
    """An image file that cannot be decoded; :attr:`line` is ``cannot read image PATH: ...``
    even when a DataLoader worker re-raised it with its traceback."""

    PREFIX = "cannot read image"

    @property
    def line(self) -> str:
        text = str(self)
        return text[text.rfind(self.PREFIX) :].splitlines()[0]


def imagefolder(config: TrainConfig, folder: str) -> Loaded:
    """The train/ and val/ splits, and a note naming the files that are not images."""
    from torchvision import datasets

    path, img_size = Path(folder), config.img_size
    for split in ("train", "val"):
        if not (path / split).is_dir():
            raise TunerError(
                f"imagefolder {path} has no {split}/ folder; expected {path}/train/<class>/* "
                f"and {path}/val/<class>/*."
            )
    train_tf, val_tf = train_transforms(img_size), val_transforms(img_size)
    read = DECODERS[config.decoder]
    ignored: list[Path] = []
    is_image = _image_files(ignored)
    try:
        train = datasets.ImageFolder(
            str(path / "train"), transform=train_tf, loader=read, is_valid_file=is_image
        )
        val = datasets.ImageFolder(
            str(path / "val"), transform=val_tf, loader=read, is_valid_file=is_image
        )
    except (FileNotFoundError, RuntimeError) as exc:
        raise TunerError(f"imagefolder {path} is malformed: {exc}".rstrip(".") + ".") from None
    if train.classes != val.classes:
        raise TunerError(
            f"imagefolder {path}: train/ and val/ have different class folders "
            f"({len(train.classes)} vs {len(val.classes)}); use the same class names in both."
        )
    ignored += [f for split in ("train", "val") for f in (path / split).iterdir() if f.is_file()]
    return train, val, len(train.classes), _ignored_note(path, ignored)


def train_transforms(img_size: int) -> Callable[[Any], torch.Tensor]:
    """Random crop, flip, uint8 out; each decoder's image stays in its library until the end
    (faster than converting first: bench/loader_bench.py)."""
    from torchvision.transforms import v2

    return v2.Compose([v2.RandomResizedCrop(img_size), v2.RandomHorizontalFlip(), _to_tensor()])


def val_transforms(img_size: int) -> Callable[[Any], torch.Tensor]:
    """Resize to 8/7 of the side, centre crop, uint8 ``[3, H, W]`` out."""
    from torchvision.transforms import v2

    return v2.Compose([v2.Resize(round(img_size / 0.875)), v2.CenterCrop(img_size), _to_tensor()])


def _to_tensor() -> Any:
    from torchvision.transforms import v2

    return v2.Compose([v2.PILToTensor(), v2.ToPureTensor()])  # a tensor passes through


def jpeg_digits(config: TrainConfig, path: str) -> Loaded:
    """The shipped data-bound workload, read as any image folder is."""
    from tuner.engine.jpeg_digits import jpeg_digits_folder

    return imagefolder(config, str(jpeg_digits_folder()))


def read_image(path: str) -> Any:
    """The RGB image at ``path``, decoded now (PIL's lazy decode would fail later, nameless)."""
    from PIL import Image

    try:
        with open(path, "rb") as file:
            return Image.open(file).convert("RGB")
    except MemoryError:
        raise
    except Exception as exc:  # PIL raises OSError, SyntaxError, ValueError, ... per format
        raise UnreadableImage(f"{UnreadableImage.PREFIX} {path}: {exc}") from None


def read_jpeg(path: str) -> Any:
    """The image at ``path`` as a uint8 tensor: JPEG by ``decode_jpeg``, others by PIL."""
    from torchvision.io import ImageReadMode, decode_jpeg, read_file

    try:
        data = read_file(path)
    except RuntimeError as exc:
        raise UnreadableImage(f"{UnreadableImage.PREFIX} {path}: {exc}") from None
    if data[:3].tolist() != _JPEG_MAGIC:
        from torchvision.transforms.functional import pil_to_tensor

        return pil_to_tensor(read_image(path))
    try:
        return decode_jpeg(data, mode=ImageReadMode.RGB)
    except RuntimeError as exc:
        raise UnreadableImage(f"{UnreadableImage.PREFIX} {path}: {error_line(exc)}") from None


_JPEG_MAGIC = [0xFF, 0xD8, 0xFF]
DECODERS: dict[str, Callable[[str], Any]] = {"pil": read_image, "decode_jpeg": read_jpeg}


def _image_files(ignored: list[Path]) -> Callable[[str], bool]:
    """ImageFolder's own file filter, noting each file it leaves out."""
    from torchvision.datasets.folder import IMG_EXTENSIONS, has_file_allowed_extension

    def is_image(file: str) -> bool:
        if has_file_allowed_extension(file, IMG_EXTENSIONS):
            return True
        ignored.append(Path(file))
        return False

    return is_image


def _ignored_note(root: Path, ignored: list[Path]) -> list[str]:
    if not ignored:
        return []
    names = [str(file.relative_to(root)) for file in sorted(ignored)[:IGNORED_SHOWN]]
    more = f" and {len(ignored) - IGNORED_SHOWN} more" if len(ignored) > IGNORED_SHOWN else ""
    return [
        f"imagefolder {root}: ignored {len(ignored)} file(s) that are not images (by their "
        f"extension): {', '.join(names)}{more}."
    ]


class SkipUnreadable(Dataset):
    """Serves the next readable image for an unreadable one, counting each once (in shared
    memory: loader workers count too)."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset
        self.unreadable = torch.zeros(len(dataset), dtype=torch.bool).share_memory_()

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        for offset in range(len(self)):
            candidate = (index + offset) % len(self)
            try:
                return self.dataset[candidate]
            except UnreadableImage as exc:
                self.unreadable[candidate], last = True, exc
        raise UnreadableImage(f"none of the {len(self)} images is readable; last: {last.line}")

    @property
    def skipped(self) -> int:
        return int(self.unreadable.sum())
