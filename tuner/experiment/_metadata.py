"""``tuner_experiment.json``, what was run and how far it got (``state``: running | finished |
interrupted): its one writer and its one reader (the search, report, trackers and --resume)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuner.errors import TunerError
from tuner.experiment._files import METADATA_FILE
from tuner.record import MAX_MEMORY_BYTES


def read_metadata(folder: Path) -> dict[str, Any]:
    """The metadata of the experiment in ``folder`` ({} when it has none); a key that holds
    what the search never writes there (damaged, or edited by hand) is refused."""
    file = Path(folder) / METADATA_FILE
    if not file.is_file():
        return {}
    try:
        data = json.loads(file.read_text())
    except json.JSONDecodeError as exc:
        raise TunerError(
            f"{file} is not valid JSON ({exc.msg}, line {exc.lineno}); the experiment folder "
            "is corrupt, restore the file or re-run the search."
        ) from None
    if not isinstance(data, dict):
        raise TunerError(f"{file} must hold a JSON object; re-run the search.")
    for key, value in data.items():
        kinds = _KINDS.get(key)
        if kinds is not None and value is not None and _json_type(value) not in kinds:
            raise TunerError(
                f"{file}: {key!r} is {_NAMES[_json_type(value)]}, the search writes "
                f"{' or '.join(_NAMES[kind] for kind in kinds)}; the experiment folder is "
                "corrupt, restore the file or re-run the search."
            )
    return data


# What the search writes under each key its readers index (a key not listed is read with its
# own check); an edited or damaged value is refused here, in one line, not where it is used.
# Any key may be null: the search writes null for what is off or not yet known (early_stopping
# with --no-early-stopping; an option given as None through the API), and its readers take
# null as absent.
_OBJECT, _LIST, _TEXT, _NUMBER, _NULL = dict, list, str, float, type(None)
_OBJECTS = ("cluster", "effects", "environment", "finished_after_trials", "options")
_OBJECTS += ("probe_cache", "remeasure", "resources_per_trial", "search_clock", "seeds")
_OBJECTS += ("speed_probes", "study", "workload")
_LISTS = ("driver_helpers", "objectives", "pinned_params", "remeasure_failures")
_LISTS += ("search_only_params", "startup_design")
_TEXTS = ("early_stopping", "name", "objective", "sampler", "space", "state", "workload_kind")
_NUMBERS = ("concurrency", "fit_time_s", "num_samples", "num_trials", "seed", MAX_MEMORY_BYTES)
_NUMBERS += ("search_time_budget_s",)
_KINDS: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(_OBJECTS, (_OBJECT,)),
    **dict.fromkeys(_LISTS, (_LIST,)),
    **dict.fromkeys(_TEXTS, (_TEXT,)),
    **dict.fromkeys(_NUMBERS, (_NUMBER, _NULL)),
    "interrupted_during": (_TEXT, _NULL),
}


_NAMES = {dict: "a JSON object", list: "a JSON list", str: "a string", float: "a number"}
_NAMES |= {bool: "true or false", _NULL: "null"}


def _json_type(value: Any) -> type:
    """The JSON type of a parsed value: an int is a number, True is not."""
    return float if isinstance(value, int | float) and not isinstance(value, bool) else type(value)


def write_metadata(folder: Path, fields: dict[str, Any]) -> None:
    """Write the metadata atomically: a killed driver never leaves half a file."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / METADATA_FILE
    temporary = target.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(fields, indent=2, sort_keys=True, default=str))
    temporary.replace(target)


def update_metadata(folder: Path, **changes: Any) -> dict[str, Any]:
    """Merge ``changes`` into the metadata and return the result."""
    fields = {**read_metadata(folder), **changes}
    write_metadata(folder, fields)
    return fields


def memory_limit(metadata: dict[str, Any]) -> float | None:
    """The search's memory budget in bytes, or ``None`` when it had none."""
    value = metadata.get(MAX_MEMORY_BYTES)
    return float(value) if isinstance(value, int | float) and value > 0 else None
