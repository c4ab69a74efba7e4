from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from engine_helpers import tiny
from PIL import Image
from torch.utils.data import TensorDataset

from tuner.engine import train
from tuner.engine.data import DATASETS, build_data, data_source, normalize
from tuner.engine.distributed import World
from tuner.errors import TunerError

CPU = torch.device("cpu")


def test_digits_is_a_fixed_uint8_split_resized_to_img_size() -> None:
    a = build_data(tiny(img_size=24, seed=0), CPU)
    b = build_data(tiny(img_size=24, seed=1), CPU)
    images, labels = next(iter(a.train_loader))
    assert images.dtype == torch.uint8 and images.shape == (32, 3, 24, 24)
    assert torch.equal(images[:, 0], images[:, 1])  # grey replicated to 3 channels
    assert a.num_classes == 10 and labels.max() < 10
    assert a.train_size == 1797 - 359 and len(a.val_loader.dataset) == 359
    # The split does not depend on the seed: runs with different seeds compare on one val set.
    assert torch.equal(a.val_loader.dataset.tensors[0], b.val_loader.dataset.tensors[0])


@pytest.mark.parametrize("drop_last", [True, False])
def test_loader_honours_batch_size_and_drop_last(drop_last: bool) -> None:
    data = build_data(tiny(batch_size=100, drop_last=drop_last), CPU)
    sizes = [labels.shape[0] for _, labels in data.train_loader]
    assert all(s == 100 for s in sizes[:-1])
    assert (sizes[-1] == 100) if drop_last else (sizes[-1] == data.train_size % 100)


def test_loader_with_workers_yields_the_same_batches_shapes() -> None:
    data = build_data(tiny(num_workers=1, persistent_workers=True, batch_size=256), CPU)
    assert data.train_loader.num_workers == 1 and data.train_loader.persistent_workers
    assert sum(labels.shape[0] for _, labels in data.train_loader) == 5 * 256


def test_batch_larger_than_the_train_split_is_one_clear_error() -> None:
    with pytest.raises(TunerError, match=r"batch_size=5000 is larger than the 1438 training"):
        build_data(tiny(batch_size=5000), CPU)


def test_synthetic_lives_on_the_device_with_the_asked_size() -> None:
    data = build_data(tiny(data="synthetic", synthetic_size=96, num_classes=7), CPU)
    batches = list(data.train_loader)
    assert len(batches) == 3 and data.on_device and data.num_classes == 7
    assert batches[0][0].dtype == torch.uint8 and int(batches[0][1].max()) < 7


def test_synthetic_host_serves_seeded_uint8_images_from_host_memory() -> None:
    config = tiny(data="synthetic_host", synthetic_size=96, num_classes=7)
    data, again = build_data(config, CPU), build_data(config, CPU)
    batches = list(data.train_loader)
    assert len(batches) == 3 and not data.on_device and data.num_classes == 7
    images, labels = batches[0]
    assert images.dtype == torch.uint8 and images.shape == (32, 3, 32, 32)
    assert images.device == CPU and int(labels.max()) < 7
    assert len(data.val_loader.dataset) == 32  # one batch of the same images
    assert torch.equal(data.train_loader.dataset.tensors[0], again.train_loader.dataset.tensors[0])
    assert train(config).status == "ok"


def test_normalize_is_the_same_math_in_every_path() -> None:
    images = torch.randint(0, 256, (2, 3, 4, 4), dtype=torch.uint8)
    mean, std = torch.full((1, 3, 1, 1), 0.5), torch.full((1, 3, 1, 1), 0.25)
    x = normalize(images, mean, std, channels_last=True)
    torch.testing.assert_close(x, (images.float() / 255 - 0.5) / 0.25)
    assert x.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("data", ["imagefolder:{tmp}/missing", "cifar10:{tmp}", "mnist", "nope:x"])
def test_missing_or_unknown_data_is_one_clear_error(data: str, tmp_path: Path) -> None:
    with pytest.raises(TunerError) as info:
        build_data(tiny(data=data.format(tmp=tmp_path)), CPU)
    assert "\n" not in str(info.value)


def _write_image_folder(root: Path, classes: int = 2, per_class: int = 4) -> None:
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        for c in range(classes):
            folder = root / split / f"class{c}"
            folder.mkdir(parents=True)
            for i in range(per_class):
                pixels = rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(folder / f"{i}.png")


def test_imagefolder_reads_train_and_val_as_uint8(tmp_path: Path) -> None:
    _write_image_folder(tmp_path)
    data = build_data(tiny(data=f"imagefolder:{tmp_path}", batch_size=4, img_size=16), CPU)
    images, _labels = next(iter(data.train_loader))
    assert data.num_classes == 2 and images.shape == (4, 3, 16, 16)
    assert images.dtype == torch.uint8
    val_images, _ = next(iter(data.val_loader))
    assert val_images.shape[1:] == (3, 16, 16)


def _truncate(image: Path) -> None:
    image.write_bytes(image.read_bytes()[:60])  # a PNG cut off after its header


@pytest.mark.parametrize("num_workers", [0, 1])
def test_a_truncated_image_stops_the_run_naming_the_file(tmp_path: Path, num_workers: int) -> None:
    _write_image_folder(tmp_path)
    bad = tmp_path / "train" / "class1" / "2.png"
    _truncate(bad)
    config = tiny(
        data=f"imagefolder:{tmp_path}", batch_size=4, img_size=16, num_workers=num_workers
    )
    result = train(config)
    assert result.status == "error"
    assert result.error.startswith(f"cannot read image {bad}: ") and "\n" not in result.error
    assert result.error.endswith("or --skip-unreadable-images serves the next readable one")


def test_skipping_unreadable_images_serves_readable_ones_and_counts_each_file_once(
    tmp_path: Path,
) -> None:
    _write_image_folder(tmp_path)
    _truncate(tmp_path / "train" / "class1" / "2.png")
    config = tiny(
        data=f"imagefolder:{tmp_path}", batch_size=4, img_size=16, num_workers=1, steps=6,
        skip_unreadable_images=True,
    )  # fmt: skip
    result = train(config)  # 3 epochs of the 8 training images: the bad one is met 3 times
    assert result.ok and result.steps == 6
    assert result.skipped_images == 1


def test_files_that_are_not_images_are_named_once_in_the_notes(tmp_path: Path) -> None:
    _write_image_folder(tmp_path)
    (tmp_path / "train" / "class0" / "labels.txt").write_text("not an image")
    (tmp_path / "val" / "README").write_text("about this data")
    data = build_data(tiny(data=f"imagefolder:{tmp_path}", batch_size=4, img_size=16), CPU)
    assert len(data.train_loader.dataset) == 8  # the images only
    (note,) = data.notes
    assert "ignored 2 file(s) that are not images" in note
    assert "train/class0/labels.txt" in note and "val/README" in note


def test_imagefolder_without_classes_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "train").mkdir()
    (tmp_path / "val").mkdir()
    with pytest.raises(TunerError, match="malformed"):
        build_data(tiny(data=f"imagefolder:{tmp_path}"), CPU)


def _write_cifar(root: Path, n: int = 8) -> None:
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {
            b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
            b"labels": rng.integers(0, 10, n).tolist(),
        }
        (root / name).write_bytes(pickle.dumps(batch))


def test_cifar10_reads_the_python_batches(tmp_path: Path) -> None:
    _write_cifar(tmp_path)
    data = build_data(tiny(data=f"cifar10:{tmp_path}", batch_size=8, img_size=32), CPU)
    assert data.train_size == 40 and len(data.val_loader.dataset) == 8
    images, _ = next(iter(data.train_loader))
    assert images.shape == (8, 3, 32, 32) and images.dtype == torch.uint8


class _RunsCode:
    def __reduce__(self) -> tuple:
        return (print, ("this must never run",))


def test_a_cifar10_batch_that_would_run_code_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    _write_cifar(tmp_path)
    (tmp_path / "data_batch_2").write_bytes(pickle.dumps({b"data": _RunsCode(), b"labels": []}))
    with pytest.raises(TunerError, match="data_batch_2 is not a CIFAR-10 python batch"):
        build_data(tiny(data=f"cifar10:{tmp_path}"), CPU)
    assert "must never run" not in capsys.readouterr().out


def test_malformed_cifar10_batch_is_a_clear_error(tmp_path: Path) -> None:
    _write_cifar(tmp_path)
    (tmp_path / "data_batch_3").write_bytes(b"not a pickle")
    with pytest.raises(TunerError, match="data_batch_3 is not a CIFAR-10 python batch"):
        build_data(tiny(data=f"cifar10:{tmp_path}"), CPU)


def test_large_sets_resize_per_image_instead_of_all_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tuner.engine import data as data_module

    images = torch.randint(0, 256, (10, 3, 8, 8), dtype=torch.uint8)
    labels = torch.arange(10)
    eager = data_module._resized(images, labels, 24)
    monkeypatch.setattr(data_module, "_PRESIZE_LIMIT_BYTES", 0)  # as if the set were huge
    lazy = data_module._resized(images, labels, 24)
    assert isinstance(eager, TensorDataset) and not isinstance(lazy, TensorDataset)
    for i in (0, 9):  # the same pixels either way
        assert torch.equal(eager[i][0], lazy[i][0]) and eager[i][0].shape == (3, 24, 24)
        assert eager[i][1] == lazy[i][1] == i


def _example(name: str, root: Path) -> str:
    """A spec naming ``name``, with a folder written for it when it takes a path."""
    writers = {"imagefolder": _write_image_folder, "cifar10": _write_cifar}
    if not DATASETS[name].takes_path:
        return name
    writers[name](root)
    return f"{name}:{root}"


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_every_registered_dataset_serves_uint8_batches_and_shards_its_val_set(
    name: str, tmp_path: Path
) -> None:
    config = tiny(data=_example(name, tmp_path), batch_size=4, img_size=16, synthetic_size=32)
    assert data_source(config.data)[0] is DATASETS[name]
    data = build_data(config, CPU)
    images, labels = next(iter(data.train_loader))
    assert images.dtype == torch.uint8 and images.shape == (4, 3, 16, 16)
    assert labels.shape == (4,) and data.on_device == (DATASETS[name].load is None)
    # Two workers score disjoint shares that together are one process's validation batches.
    whole = sum(y.shape[0] for _, y in data.val_loader)
    shares = [build_data(config, CPU, World(rank, 2)).val_loader for rank in (0, 1)]
    assert sum(y.shape[0] for share in shares for _, y in share) == whole


@pytest.mark.parametrize("spec", ["digits:/x", "imagefolder", "cifar10:", "Digits"])
def test_a_spec_that_does_not_fit_the_registry_names_every_choice(spec: str) -> None:
    with pytest.raises(TunerError, match=r"use digits, synthetic, .* cifar10:PATH or your own"):
        data_source(spec)
