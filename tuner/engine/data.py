"""Datasets and loaders: the :data:`DATASETS` registry and the user's own (``module:function``
-> ``(train, val, num_classes[, {"mean": ..., "std": ...}])``). Every source gives
:class:`Splits`; :func:`build_data` puts the same loaders over each (the loader knobs act on
all alike). Loaders yield **uint8** images (the host moves bytes); :func:`normalize` makes the
float input on the device, the same math in the loop and the prefetcher. A user's PIL images
are served as uint8; float tensors are taken in their own units.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, DistributedSampler, TensorDataset

from tuner.config import TrainConfig
from tuner.engine.digits import load_digits
from tuner.engine.distributed import World
from tuner.engine.images import SkipUnreadable, imagefolder, jpeg_digits
from tuner.errors import TunerError
from tuner.usercode import UserCodeError, call_user, is_ref, resolve

__all__ = [
    "DATASETS",
    "DataBundle",
    "DataSource",
    "Splits",
    "build_data",
    "data_source",
    "load_ahead",
    "normalize",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
DIGITS_MEAN = (0.2, 0.2, 0.2)  # mostly dark 8x8 strokes; 0.5 would also train, this is closer
DIGITS_STD = (0.35, 0.35, 0.35)
USER_MEAN, USER_STD = (0.0,), (1.0,)  # a user's data unless it says: bytes scaled to [0, 1]
VAL_FRACTION = 0.2


@dataclass
class DataBundle:
    """What the loop needs from the data stage."""

    train_loader: Any  # iterable of (uint8 images, labels); has len()
    val_loader: Any  # this worker's share of the validation batches
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    train_size: int
    on_device: bool = False  # batches are already on the run's device (synthetic)
    files: bool = False  # decoded from image files (config.decoder acts)
    # The train shuffle (this worker's shard): a function of (seed, epoch), set each epoch.
    sampler: DistributedSampler | None = None
    notes: list[str] = field(default_factory=list)  # e.g. files of an image folder ignored
    skipping: tuple[SkipUnreadable, ...] = ()  # datasets that skip unreadable images

    @property
    def skipped_images(self) -> int:
        """Unreadable image files skipped so far (each counted once)."""
        return sum(dataset.skipped for dataset in self.skipping)


class Splits(NamedTuple):
    """What a data source loads (``mean``/``std``: a user's, over its source's)."""

    train: Dataset
    val: Dataset
    num_classes: int
    notes: tuple[str, ...] | list[str] = ()
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None


@dataclass(frozen=True)
class DataSource:
    """One kind of data: ``name`` or ``name:PATH`` (``takes_path``); ``load`` None: generated
    on the device; ``files``: image files (the decoder and ``skip_unreadable_images`` act)."""

    name: str
    mean: tuple[float, ...]  # per-channel normalization in [0, 1] units (one value: all)
    std: tuple[float, ...]
    load: Callable[[TrainConfig, str], Splits] | None
    takes_path: bool = False
    files: bool = False
    kept: bool = False  # loaded once per process and kept: later runs reuse it (load_ahead)


def normalize(
    images: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, *, channels_last: bool = False
) -> torch.Tensor:
    """uint8 (scaled to [0, 1]) or float images -> normalized float32, on their device."""
    if images.dtype == torch.uint8:
        x = images.float().div_(255.0).sub_(mean).div_(std)
    else:  # a user's float images: never in place, the batch may be the dataset's own tensor
        x = images.float().sub(mean).div_(std)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


def data_source(spec: str) -> tuple[DataSource, str]:
    """The registry entry and path ``spec`` names (TunerError: unknown, or a path misplaced)."""
    name, _, path = spec.partition(":")
    source = DATASETS.get(name)
    if source is None and is_ref(spec):
        return DataSource(spec, USER_MEAN, USER_STD, _user_data), ""
    if source is None or source.takes_path != bool(path):
        specs = [f"{s.name}:PATH" if s.takes_path else s.name for s in DATASETS.values()]
        raise TunerError(
            f"data={spec!r} is not known; use {', '.join(specs)} or your own module:function."
        )
    return source, path


def load_ahead(config: TrainConfig) -> None:
    """Load ``config``'s data now if its source keeps it for the process."""
    source, path = data_source(config.data)
    if source.kept and source.load is not None:
        source.load(config, path)


def is_user_data(spec: str) -> bool:
    """Whether ``spec`` names the user's own data (``imagefolder:train`` is built-in data)."""
    return data_source(spec)[0].load is _user_data


def build_data(config: TrainConfig, device: torch.device, world: World | None = None) -> DataBundle:
    """This worker's loaders: its shard of each epoch's shuffle and every ``world.size``-th
    validation batch (TunerError: bad data or batch size)."""
    source, path, world = *data_source(config.data), world or World()
    if source.load is None:
        return _synthetic(config, device, world)
    splits = Splits(*source.load(config, path))
    train, val, classes, notes = splits.train, splits.val, splits.num_classes, splits.notes
    if config.drop_last and config.batch_size > len(train):
        raise TunerError(
            f"batch_size={config.batch_size} is larger than the {len(train)} training images "
            f"of {config.data!r}, so drop_last leaves zero steps; use batch_size <= {len(train)}."
        )
    skipping: tuple[SkipUnreadable, ...] = ()
    if source.files and config.skip_unreadable_images:
        train, val = SkipUnreadable(train), SkipUnreadable(val)
        skipping = (train, val)
    sampler = DistributedSampler(train, world.size, world.rank, shuffle=True, seed=config.seed)
    common: dict[str, Any] = dict(
        num_workers=config.num_workers,
        pin_memory=config.pin_memory and device.type == "cuda",
        persistent_workers=config.persistent_workers,
        prefetch_factor=config.prefetch_factor,
    )
    train_loader = DataLoader(
        train, config.batch_size, sampler=sampler, drop_last=config.drop_last, **common
    )
    val_batches = _val_share(len(val), config.batch_size, config.max_eval_batches, world)
    val_loader = DataLoader(val, batch_sampler=val_batches, **common)
    return DataBundle(
        train_loader,
        val_loader,
        classes,
        splits.mean or source.mean,
        splits.std or source.std,
        len(train),
        sampler=sampler,
        notes=list(notes),
        skipping=skipping,
        files=source.files,
    )


def _val_share(size: int, batch: int, limit: int | None, world: World) -> list[list[int]]:
    """This worker's validation batches: every ``world.size``-th of the first ``limit``, then
    of a fixed permutation (a folder lists files by class: its first batches, few classes)."""
    count = min(-(-size // batch), limit or size)
    order = list(range(size))
    if count * batch < size:
        order = torch.randperm(size, generator=torch.Generator().manual_seed(1234)).tolist()
    mine = range(world.rank, count, world.size)
    return [order[i * batch : min(size, (i + 1) * batch)] for i in mine]


# ---- the user's own: module:function -> (train, val, num_classes[, normalization]) ----------


def _user_data(config: TrainConfig, path: str) -> Splits:
    what = f"data={config.data!r}"
    built = call_user(resolve(config.data, what="data"), config, what=what)
    if not isinstance(built, tuple) or len(built) not in (3, 4):
        raise UserCodeError(
            f"{what} returned {type(built).__name__}; return (train_dataset, val_dataset, "
            "num_classes) or add a 4th item {'mean': [...], 'std': [...]}."
        )
    train, val, classes, *extra = built
    for split, dataset in (("train", train), ("val", val)):
        if not isinstance(dataset, Dataset) or not hasattr(dataset, "__len__"):
            raise UserCodeError(
                f"{what} returned a {type(dataset).__name__} as its {split} dataset; return a "
                "map-style torch.utils.data.Dataset (with __getitem__ and __len__)."
            )
        if len(dataset) == 0:
            raise UserCodeError(f"{what}: its {split} dataset is empty; give it some items.")
    if isinstance(classes, bool) or not isinstance(classes, int) or classes < 1:
        raise UserCodeError(f"{what} returned num_classes={classes!r}; it must be an int >= 1.")
    mean, std = _normalization(extra[0] if extra else {}, what)
    return Splits(_UserItems(train), _UserItems(val), classes, (), mean, std)


def _normalization(given: Any, what: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    try:
        mean = tuple(float(v) for v in given.get("mean", USER_MEAN))
        std = tuple(float(v) for v in given.get("std", USER_STD))
    except (AttributeError, TypeError, ValueError):
        mean, std = (), ()
    if not mean or len(mean) != len(std) or not all(s > 0 for s in std):
        raise UserCodeError(
            f"{what}: its 4th item must be {{'mean': [...], 'std': [...]}}, one value per "
            "channel in [0, 1] units, std > 0."
        )
    return mean, std


class _UserItems(Dataset):
    """A user's dataset as served: a PIL image becomes a uint8 tensor; tensors pass unchanged."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> Any:
        item = self.dataset[index]
        if isinstance(item, tuple) and len(item) == 2 and not isinstance(item[0], torch.Tensor):
            from PIL import Image
            from torchvision.transforms.functional import pil_to_tensor

            if isinstance(item[0], Image.Image):
                return pil_to_tensor(item[0]), item[1]
        return item


# ---- digits: scikit-learn's embedded 8x8 handwritten digits ----------------------------------


def _digits(config: TrainConfig, path: str) -> Splits:
    return (*_digits_at(config.img_size), [])


@functools.lru_cache(maxsize=4)
def _digits_at(img_size: int) -> tuple[Dataset, Dataset, int]:
    """Built once per size and process (read-only tensors: the probes' runs share them)."""
    pixels, target = load_digits()
    gray = (torch.from_numpy(pixels) * (255 / 16)).round().to(torch.uint8)  # 0..16 levels
    images = gray.unsqueeze(1).expand(-1, 3, -1, -1).contiguous()  # [N, 3, 8, 8]
    labels = torch.from_numpy(target).long()
    # A fixed split, independent of config.seed (which only shuffles training order): every run
    # is scored on the same 359 validation images, so runs compare.
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(1234))
    n_val = int(len(labels) * VAL_FRACTION)
    val_idx, train_idx = order[:n_val], order[n_val:]
    train = _resized(images[train_idx], labels[train_idx], img_size)
    val = _resized(images[val_idx], labels[val_idx], img_size)
    return train, val, 10


# ---- resizing in-memory uint8 images (digits, cifar10) ---------------------------------------

_PRESIZE_LIMIT_BYTES = 1 << 30  # resize once up front when the result fits; else per image


def _resized(images: torch.Tensor, labels: torch.Tensor, size: int) -> Dataset:
    """uint8 images served at ``size``: resized once if small, else per image in the loader
    (CIFAR-10 at 224 px would be 7.5 GB of uint8)."""
    if images.shape[-1] == size and images.shape[-2] == size:
        return TensorDataset(images, labels)
    if images.shape[0] * images.shape[1] * size * size > _PRESIZE_LIMIT_BYTES:
        return _LazyResize(images, labels, size)
    return TensorDataset(torch.cat([_resize(c, size) for c in images.split(256)]), labels)


def _resize(images: torch.Tensor, size: int) -> torch.Tensor:
    x = F.interpolate(images.float(), size=(size, size), mode="bilinear", align_corners=False)
    return x.clamp(0, 255).round().to(torch.uint8)


class _LazyResize(Dataset):
    def __init__(self, images: torch.Tensor, labels: torch.Tensor, size: int) -> None:
        self.images, self.labels, self.size = images, labels, size

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return _resize(self.images[index : index + 1], self.size)[0], self.labels[index]


# ---- cifar10:PATH: the python-pickle batches, no download ------------------------------------


class _BatchUnpickler(pickle.Unpickler):
    """Rebuilds plain containers and numpy arrays only: a batch file cannot run code."""

    ALLOWED = frozenset(
        {
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"),
        }
    )

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a batch file")
        return super().find_class(module, name)


def _cifar10(config: TrainConfig, folder: str) -> Splits:
    path, img_size = Path(folder), config.img_size
    root = path / "cifar-10-batches-py" if (path / "cifar-10-batches-py").is_dir() else path
    names = [f"data_batch_{i}" for i in range(1, 6)]
    missing = [n for n in [*names, "test_batch"] if not (root / n).is_file()]
    if missing:
        raise TunerError(
            f"cifar10 folder {root} lacks {', '.join(missing)}; point cifar10:PATH at the "
            "extracted cifar-10-batches-py folder (python version)."
        )
    train = _cifar_batches([root / n for n in names], img_size)
    val = _cifar_batches([root / "test_batch"], img_size)
    return train, val, 10, []


def _cifar_batches(files: list[Path], img_size: int) -> Dataset:
    images, labels = [], []
    for file in files:
        try:
            with file.open("rb") as f:
                batch = _BatchUnpickler(f, encoding="bytes").load()
            images.append(torch.as_tensor(batch[b"data"], dtype=torch.uint8))
            labels.append(torch.as_tensor(batch[b"labels"], dtype=torch.long))
        except (pickle.UnpicklingError, KeyError, EOFError, TypeError, ValueError) as exc:
            raise TunerError(
                f"{file} is not a CIFAR-10 python batch ({type(exc).__name__}); "
                "re-extract cifar-10-python.tar.gz."
            ) from None
    return _resized(torch.cat(images).view(-1, 3, 32, 32), torch.cat(labels), img_size)


# ---- synthetic: random images generated on the device ----------------------------------------


def _synthetic(config: TrainConfig, device: torch.device, world: World) -> DataBundle:
    if config.batch_size * world.size > config.synthetic_size:
        raise TunerError(
            f"batch_size={config.batch_size} x {world.size} worker(s) is larger than "
            f"synthetic_size={config.synthetic_size}, so an epoch has zero steps; raise "
            "synthetic_size."
        )
    classes = config.num_classes or 1000
    gen = torch.Generator(device=device).manual_seed(config.seed)
    shape = (config.batch_size, 3, config.img_size, config.img_size)
    images = torch.randint(0, 256, shape, dtype=torch.uint8, device=device, generator=gen)
    labels = torch.randint(0, classes, (config.batch_size,), device=device, generator=gen)
    # One fixed batch on the device, served again and again (as timm's benchmark does): no host
    # work at all, so the loop measures the model alone.
    train = [(images, labels)] * (config.synthetic_size // (config.batch_size * world.size))
    val = [(images, labels)] * (1 if world.rank == 0 else 0)
    return DataBundle(train, val, classes, IMAGENET_MEAN, IMAGENET_STD, config.synthetic_size, True)


# ---- synthetic_host: random images in host memory, through a DataLoader ----------------------


def _synthetic_host(config: TrainConfig, path: str) -> Splits:
    """``synthetic_size`` random uint8 images in host memory through a DataLoader: a real
    dataset's path (loader, then a copy to the device) for the data path's knobs, without files.
    Validation: the first batch (random labels: accuracy means nothing here)."""
    classes = config.num_classes or 1000
    images, labels = _host_images(config.synthetic_size, config.img_size, classes, config.seed)
    n_val = min(config.batch_size, config.synthetic_size)
    return TensorDataset(images, labels), TensorDataset(images[:n_val], labels[:n_val]), classes, []


# One set kept: at the GPU recipe's size it is 1.2 GB and takes seconds to draw, and the recipe's
# runs all use the same one. Read only (loaders index it), so sharing between runs is safe.
@functools.lru_cache(maxsize=1)
def _host_images(
    size: int, img_size: int, classes: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (size, 3, img_size, img_size), dtype=torch.uint8, generator=gen)
    return images, torch.randint(0, classes, (size,), generator=gen)


DATASETS: dict[str, DataSource] = {
    s.name: s
    for s in (
        DataSource("digits", DIGITS_MEAN, DIGITS_STD, _digits, kept=True),
        DataSource("synthetic", IMAGENET_MEAN, IMAGENET_STD, None),
        DataSource("synthetic_host", IMAGENET_MEAN, IMAGENET_STD, _synthetic_host, kept=True),
        DataSource("imagefolder", IMAGENET_MEAN, IMAGENET_STD, imagefolder, True, True),
        DataSource("jpeg_digits", IMAGENET_MEAN, IMAGENET_STD, jpeg_digits, files=True),
        DataSource("cifar10", CIFAR10_MEAN, CIFAR10_STD, _cifar10, True),
    )
}
