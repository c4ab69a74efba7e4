"""The input pipeline: the shipped JPEG workload, the two decoders, the host prefetch thread,
the loader measured alone and the data-bound verdict (real files, real loaders, real steps)."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path

import pytest
import torch
from engine_helpers import tiny
from PIL import Image
from torch.utils.data import DataLoader, Dataset, TensorDataset

from tuner.engine import train
from tuner.engine.data import build_data, data_source
from tuner.engine.images import UnreadableImage, read_image, read_jpeg, val_transforms
from tuner.engine.jpeg_digits import IMAGE_SIDE, VERSION, jpeg_digits_folder
from tuner.engine.prefetch import HostPrefetcher
from tuner.engine.result import DATA_BOUND_WAIT, bound_of
from tuner.errors import TunerError
from tuner.usercache import CACHE_DIR_ENV

CPU = torch.device("cpu")
JPEG = {"data": "jpeg_digits", "model": "test_resnet", "model_kwargs": {}, "img_size": 32}


@pytest.fixture(scope="module")
def folder() -> Path:
    return jpeg_digits_folder()  # the session's cache folder (tests/conftest.py)


def test_the_jpeg_workload_is_real_jpeg_files_in_an_image_folder(folder: Path) -> None:
    files = {split: sorted((folder / split).glob("*/*.jpg")) for split in ("train", "val")}
    assert len(files["train"]) + len(files["val"]) == 1797  # every embedded digit, once
    assert len(files["val"]) == int(1797 * 0.2)
    assert {f.parent.name for f in files["val"]} == {str(d) for d in range(10)}
    for file in files["train"][:20]:
        assert file.read_bytes()[:3] == b"\xff\xd8\xff"  # a JPEG
        with Image.open(file) as image:
            assert image.size == (IMAGE_SIDE, IMAGE_SIDE) and image.format == "JPEG"
    assert folder.name == f"jpeg_digits-v{VERSION}"
    before = files["train"][0].stat().st_mtime_ns
    assert jpeg_digits_folder() == folder and files["train"][0].stat().st_mtime_ns == before


def test_it_goes_through_the_imagefolder_path(folder: Path) -> None:
    source, path = data_source("jpeg_digits")
    assert source.files and not path  # image files: the decoder and the skip rule apply
    ours = build_data(tiny(**JPEG, batch_size=16), CPU)
    theirs = build_data(tiny(**{**JPEG, "data": f"imagefolder:{folder}"}, batch_size=16), CPU)
    assert ours.train_size == theirs.train_size and ours.num_classes == 10
    assert ours.mean == theirs.mean  # the same source settings as a user's folder
    images, labels = next(iter(ours.val_loader))
    other, _ = next(iter(theirs.val_loader))
    assert images.dtype == torch.uint8 and images.shape == (16, 3, 32, 32)
    assert torch.equal(images, other) and labels.max() < 10


def _build_in(cache: str) -> str:
    import os

    os.environ[CACHE_DIR_ENV] = cache
    return str(jpeg_digits_folder())


@pytest.mark.slow  # two processes build the whole folder: 29 CPU-seconds (tests/tiers.py: FAST_CPU)
def test_two_processes_building_it_at_once_leave_one_whole_folder(tmp_path: Path) -> None:
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        built = pool.map(_build_in, [str(tmp_path)] * 2)
    assert built[0] == built[1]
    assert len(list(Path(built[0]).glob("*/*/*.jpg"))) == 1797
    assert [p.name for p in tmp_path.iterdir()] == [Path(built[0]).name]  # no scratch left


def test_the_two_decoders_agree_within_rounding(folder: Path) -> None:
    for file in sorted((folder / "val").glob("*/*.jpg"))[:10]:
        pil = torch.from_numpy(__import__("numpy").asarray(read_image(str(file))).copy())
        tensor = read_jpeg(str(file))
        assert tensor.dtype == torch.uint8 and tensor.shape == (3, IMAGE_SIDE, IMAGE_SIDE)
        diff = (pil.permute(2, 0, 1).int() - tensor.int()).abs()
        assert diff.float().mean() < 1.0 and diff.max() <= 16  # the IDCTs round differently
        # Each path resizes in its own library (PIL's on PIL images, torch's on tensors): what
        # the model sees still differs by rounding alone.
        tf = val_transforms(64)
        seen = (tf(read_image(str(file))).int() - tf(read_jpeg(str(file))).int()).abs()
        assert seen.float().mean() < 0.1 and seen.max() <= 2


def test_decode_jpeg_reads_other_formats_with_pil_and_names_a_broken_file(tmp_path: Path) -> None:
    png = tmp_path / "a.png"
    Image.new("RGB", (8, 6), (10, 20, 30)).save(png)
    assert tuple(read_jpeg(str(png)).shape) == (3, 6, 8)
    broken = tmp_path / "b.jpg"
    good = tmp_path / "good.jpg"
    Image.new("RGB", (64, 64), (200, 0, 0)).save(good)
    broken.write_bytes(good.read_bytes()[:40])
    for read in (read_image, read_jpeg):
        with pytest.raises(UnreadableImage, match=f"cannot read image {broken}"):
            read(str(broken))


def test_a_run_on_either_decoder_trains_and_says_which_ran(folder: Path) -> None:
    for decoder in ("pil", "decode_jpeg"):
        result = train(tiny(**JPEG, decoder=decoder, batch_size=16, steps=2))
        assert result.status == "ok", result.error
        assert result.effective["decoder"] == decoder
    digits = train(tiny(decoder="decode_jpeg"))  # nothing to decode: said, and not pretended
    assert digits.effective["decoder"] == "pil"
    assert any("decoder=decode_jpeg has nothing to decode" in n for n in digits.notes)


class _Numbers(Dataset):
    def __init__(self, size: int, fail_at: int | None = None) -> None:
        self.size, self.fail_at = size, fail_at

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if index == self.fail_at:
            raise ValueError(f"item {index} is broken")
        return torch.full((3, 2, 2), index, dtype=torch.uint8), torch.tensor(index)


def test_the_host_prefetcher_yields_the_loaders_batches_in_order() -> None:
    loader = DataLoader(_Numbers(40), batch_size=4)
    ahead = HostPrefetcher(loader)
    assert len(ahead) == len(loader) == 10
    for _ in range(2):  # an iterable, like the loader: each pass is a new one
        got = [labels.tolist() for _, labels in ahead]
        assert got == [labels.tolist() for _, labels in loader]


def test_the_host_prefetcher_raises_the_loaders_error_and_ends_its_thread() -> None:
    before = threading.active_count()
    with pytest.raises(ValueError, match="item 9 is broken"):
        for _ in HostPrefetcher(DataLoader(_Numbers(40, fail_at=9), batch_size=4)):
            pass
    batches = iter(HostPrefetcher(DataLoader(_Numbers(400), batch_size=4), depth=2))
    next(batches)
    batches.close()  # a run that stops early leaves the rest unread
    assert threading.active_count() == before


def test_host_prefetch_trains_the_same_steps_and_says_it_ran() -> None:
    plain = train(tiny(steps=4, seed=3))
    ahead = train(tiny(steps=4, seed=3, host_prefetch=True))
    assert ahead.status == "ok" and ahead.effective["host_prefetch"] is True
    # The same batches in the same order: the same losses (only who loads them changed).
    assert [v for _, v in ahead.train_loss_curve] == [v for _, v in plain.train_loss_curve]


def test_a_run_measures_its_loader_alone_and_says_what_bound_it(folder: Path) -> None:
    result = train(tiny(**JPEG, batch_size=16, steps=4, max_eval_batches=1))
    assert result.loader_images_per_second is not None and result.loader_images_per_second > 0
    assert result.bound == bound_of(result.data_wait_fraction)
    synthetic = train(tiny(data="synthetic", synthetic_size=64, num_classes=10, steps=2))
    assert synthetic.bound is None and synthetic.loader_images_per_second is None  # no loader
    stopped = train(tiny(steps=6, eval_every_steps=2), on_eval=lambda progress: True)
    assert stopped.loader_images_per_second is None  # stopped early: not measured
    assert stopped.bound is not None


def test_the_verdict_is_data_bound_from_the_wait_threshold() -> None:
    assert bound_of(None) is None
    assert bound_of(DATA_BOUND_WAIT) == "data" and bound_of(0.9) == "data"
    assert bound_of(DATA_BOUND_WAIT - 0.01) == "compute" and bound_of(0.0) == "compute"


def test_a_loader_with_too_few_batches_is_not_timed() -> None:
    from tuner.engine.distributed import World
    from tuner.engine.meters import LOADER_BATCHES, loader_images_per_second

    dataset = TensorDataset(torch.zeros(LOADER_BATCHES, 1), torch.zeros(LOADER_BATCHES))
    assert loader_images_per_second(DataLoader(dataset, batch_size=1), World()) is None
    enough = TensorDataset(torch.zeros(40, 1), torch.zeros(40))
    assert loader_images_per_second(DataLoader(enough, batch_size=2), World()) > 0


def test_a_users_own_dataset_gets_the_same_loader_knobs_and_figures() -> None:
    # user_factories:pil_data: 64 PIL images, as a Dataset reading files gives them
    config = tiny(data="user_factories:pil_data", model="user_factories:good_model",
                  model_kwargs={}, img_size=16, batch_size=4, steps=3, num_workers=1,
                  persistent_workers=True, prefetch_factor=4, host_prefetch=True)  # fmt: skip
    result = train(config)
    assert result.status == "ok", result.error
    ran = result.effective
    assert (ran["num_workers"], ran["prefetch_factor"], ran["host_prefetch"]) == (1, 4, True)
    assert ran["decoder"] == "pil"  # the user's Dataset decodes its own files
    assert result.loader_images_per_second > 0
    assert result.bound == bound_of(result.data_wait_fraction)


def test_a_damaged_or_half_built_folder_is_rebuilt_not_read(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    half = tmp_path / f"jpeg_digits-v{VERSION}"
    (half / "train" / "0").mkdir(parents=True)  # a build killed halfway, or a folder cut by hand
    (half / "train" / "0" / "x.jpg").write_bytes(b"not all there")
    folder = jpeg_digits_folder()
    assert folder == half and len(list(folder.glob("*/*/*.jpg"))) == 1797
    assert not (folder / "train" / "0" / "x.jpg").exists()
    assert [p.name for p in tmp_path.iterdir()] == [half.name]  # no scratch left


def test_an_unwritable_cache_folder_is_one_line_naming_the_setting(tmp_path: Path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(CACHE_DIR_ENV, str(blocker / "cache"))
    with pytest.raises(TunerError, match=f"cannot build the jpeg_digits files in {blocker}/cache"):
        jpeg_digits_folder()
    with pytest.raises(TunerError, match=f"point {CACHE_DIR_ENV} at a writable folder"):
        train(tiny(**JPEG, steps=1))  # before any step: a usage error, not a failed run


def test_a_limited_evaluation_samples_every_class_of_a_sorted_folder(folder: Path) -> None:
    # An image folder lists its files class by class: the first batch alone would be class 0.
    data = build_data(tiny(**JPEG, batch_size=64, max_eval_batches=1), CPU)
    _, labels = next(iter(data.val_loader))
    assert len(labels) == 64 and len(set(labels.tolist())) >= 8
    again = build_data(tiny(**JPEG, batch_size=64, max_eval_batches=1, seed=5), CPU)
    assert torch.equal(next(iter(again.val_loader))[1], labels)  # the same sample every run


class _FailsAfter(Dataset):
    def __init__(self, items: int) -> None:
        self.left = items

    def __len__(self) -> int:
        return 400

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.left -= 1
        if self.left < 0:
            raise OSError("the disk went away")
        return torch.zeros(3, 2, 2, dtype=torch.uint8), torch.tensor(0)


def test_a_loader_that_fails_when_measured_alone_leaves_the_figure_out() -> None:
    from tuner.engine.distributed import World
    from tuner.engine.meters import loader_images_per_second

    assert loader_images_per_second(DataLoader(_FailsAfter(10), batch_size=4), World()) is None


def test_a_run_with_the_host_thread_leaves_no_thread_behind() -> None:
    before = threading.active_count()
    result = train(tiny(steps=3, host_prefetch=True))
    assert result.status == "ok" and result.loader_images_per_second is not None
    assert threading.active_count() == before
