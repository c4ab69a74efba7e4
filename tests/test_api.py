"""The Python API (tuner.search, tuner.train, tuner.load; tuner.api's other commands): what the
CLI runs, callable from a notebook, its errors TunerError (never SystemExit)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

import tuner
import tuner.api
from tuner.experiment import read_trials_csv
from tuner.experiment.options import SearchOptions
from tuner.report import write_report
from tuner.usercode import UserCodeError

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "own_space.py"


def test_import_tuner_stays_light() -> None:
    import subprocess

    heavy = "('torch', 'ray', 'pandas')"
    code = f"import sys, tuner; print(sorted(m for m in {heavy} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_search_is_the_apis_plain_function_after_the_ray_side_package_loads() -> None:
    """Importing the Ray-side package (tuner.tune) leaves ``tuner.search`` the API's function:
    no package shadows it, and no module of tuner is callable."""
    import inspect

    import tuner.api
    import tuner.tune
    import tuner.tune.run  # the search's flow, as the CLI loads it

    assert inspect.isfunction(tuner.search) and tuner.search is tuner.api.search
    loaded = {n: m for n, m in sys.modules.items() if n == "tuner" or n.startswith("tuner.")}
    assert not [n for n, m in loaded.items() if callable(m)]


def test_train_runs_the_users_model_and_data_from_python() -> None:
    result = tuner.train(
        model=f"{EXAMPLE}:build_model",
        data=f"{EXAMPLE}:build_data",
        model_kwargs={"width": 8},
        img_size=16,
        epochs=None,
        steps=8,
        warmup_steps=1,
        batch_size=16,
    )
    assert result.status == "ok", result.error
    assert result.config["model_kwargs"] == {"width": 8} and result.steps == 8


def test_train_takes_a_config_and_settings_over_it() -> None:
    own = {"model": f"{EXAMPLE}:build_model", "data": f"{EXAMPLE}:build_data"}
    base = tuner.TrainConfig(**own, img_size=16, epochs=None, steps=2, warmup_steps=1)
    result = tuner.train(base, batch_size=8)
    assert result.status == "ok" and result.config["batch_size"] == 8


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tuner.train(lr="abc"), r"lr='abc' is a str"),
        (lambda: tuner.train(model="no_such_module:build", steps=1), r"does not import"),
        (lambda: tuner.search("no_such_space_anywhere"), r"Unknown search space"),
        (
            lambda: tuner.search("smoke_space", num_sample=3),
            r"Unknown search option\(s\) num_sample",
        ),
        (lambda: tuner.search("smoke_space", objective="fast"), r"--objective 'fast'"),
        (lambda: tuner.search("smoke_space", storage=5), r"^--storage 5 must be text \(a str\)"),
        (lambda: tuner.search("smoke_space", name=5), r"^--name 5 must be text \(a str\), not"),
        (lambda: tuner.search("smoke_space", resume="yes"), r"^--resume 'yes' must be True or"),
        (lambda: tuner.search("smoke_space", overrides=[1]), r"^--set \[1\] must be a mapping"),
        (lambda: tuner.search(123), r"^Search space notebook: the int given has no space\("),
        (lambda: tuner.load("/nowhere/experiment"), r"experiment"),
        (lambda: tuner.api.report("/nowhere/experiment"), r"experiment"),
        (lambda: tuner.api.ablate(repeats=0), r"--repeats 0 must be at least 1"),
        (lambda: tuner.api.ablate(skip=["dropout"], device="cpu"), r"--skip dropout unknown"),
        (lambda: tuner.api.verify(repeats=1), r"at least 2 pairs"),
        (lambda: tuner.api.verify(amp="fp16"), r"compares fp32 \(off\) or bf16"),
    ],
)
def test_errors_from_python_are_tuner_errors(call, message: str) -> None:
    with pytest.raises(tuner.TunerError, match=message):
        call()


def test_search_options_take_a_path_where_the_cli_takes_a_folder(tmp_path: Path) -> None:
    options = SearchOptions(space=tmp_path / "s.py", storage=tmp_path, reports_dir=tmp_path)
    assert (options.space, options.storage) == (str(tmp_path / "s.py"), str(tmp_path))
    assert options.reports_dir == str(tmp_path)


class BrokenNotebookSpace:
    """A space defined in a notebook whose model factory raises."""

    WORKLOADS: ClassVar[dict[str, Any]] = {"cpu": {"img_size": 16, "steps": 2, "batch_size": 4}}

    @staticmethod
    def space(trial: Any, *, cuda: bool) -> dict[str, Any]:
        return {}

    @staticmethod
    def build_model(config: tuner.TrainConfig, num_classes: int) -> Any:
        raise RuntimeError("forgot the head")

    @staticmethod
    def build_data(config: tuner.TrainConfig) -> tuple[Any, Any, int]:
        import torch
        from torch.utils.data import TensorDataset

        images = torch.zeros(8, 1, 16, 16, dtype=torch.uint8)
        split = TensorDataset(images, torch.zeros(8, dtype=torch.long))
        return split, split, 2


def test_bad_user_code_in_a_search_fails_in_the_driver_before_ray(tmp_path: Path) -> None:
    """The preflight builds the model and one batch before Ray starts: one TunerError."""
    import ray

    with pytest.raises(UserCodeError, match=r"raised RuntimeError: forgot the head at .*test_api"):
        tuner.search(BrokenNotebookSpace, storage=str(tmp_path), name="broken", num_samples=1)
    assert not ray.is_initialized()
    assert not (tmp_path / "broken").exists()


def test_load_reads_a_finished_experiment_as_its_report_does(
    smoke_experiment: Path, tmp_path: Path
) -> None:
    loaded = tuner.load(smoke_experiment)
    written = write_report(loaded.experiment, loaded.answer, out_dir=tmp_path / "report")
    from_csv = read_trials_csv(written / "trials.csv")
    assert list(loaded.trials.columns) == list(from_csv.columns)
    assert loaded.trials["trial_id"].tolist() == from_csv["trial_id"].tolist()
    assert loaded.recommended is not None and loaded.answer_text
    assert loaded.usable >= 1 and loaded.experiment_dir == smoke_experiment
