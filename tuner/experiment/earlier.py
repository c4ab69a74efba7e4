"""The earlier experiment ``--warm-start`` names: found by its name under the storage or by
its folder, read, and checked to be of this search's space and workload, before Ray starts
(Ray-free; :mod:`tuner.tune.warm_start` gives its trials to the new study). Reading it loads
pandas, so the preflight imports this module when it gets that far.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuner.errors import TunerError
from tuner.experiment._load import Experiment, load_experiment
from tuner.experiment.options import SearchOptions
from tuner.experiment.paths import ExperimentPaths

__all__ = ["check_same_workload", "read_warm_start"]


def read_warm_start(
    options: SearchOptions, *, space_name: str, workload: Mapping[str, Any] | None = None
) -> Experiment | None:
    """The experiment ``--warm-start`` names, checked against this search's space (and
    ``workload``, when already known) before Ray starts."""
    reference = options.warm_start
    if not reference:
        return None
    folder = Path(reference)
    if not folder.is_dir():
        folder = ExperimentPaths.of(options.storage, reference).local
    try:
        earlier = load_experiment(folder)
    except TunerError as exc:  # the flag named, so the user knows which path was wrong
        raise TunerError(f"--warm-start {reference}: {exc}") from None
    if earlier.study is None:
        raise TunerError(
            f"--warm-start {reference}: its study.db could not be read; warm-start from another "
            "experiment or leave the flag out."
        )
    old_space = earlier.metadata.get("space")
    if old_space != space_name:
        raise TunerError(
            f"--warm-start {reference}: that experiment searched space {old_space!r}, this "
            f"search {space_name!r}; warm-start from an experiment of {space_name!r}."
        )
    if workload is not None:
        check_same_workload(reference, earlier, workload)
    return earlier


def check_same_workload(reference: str, earlier: Experiment, workload: Mapping[str, Any]) -> None:
    """Refuse an earlier experiment ``reference`` names whose workload differs from
    ``workload``: its figures would not compare."""
    old = earlier.metadata.get("workload") or {}
    differ = sorted(k for k in {*old, *workload} if _json(old.get(k)) != _json(workload.get(k)))
    if differ:
        shown = ", ".join(f"{k} {old.get(k)!r} -> {workload.get(k)!r}" for k in differ[:4])
        raise TunerError(
            f"--warm-start {reference}: its workload differs ({shown}), so its figures do not "
            "compare; search the same workload (--workload, --set) or leave --warm-start out."
        )


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)  # a saved tuple reads as a list
