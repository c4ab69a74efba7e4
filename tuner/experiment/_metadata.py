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
    """The metadata of the experiment in ``folder`` ({} when it has none).

    Raises:
        TunerError: the file is not a JSON object (damaged).
    """
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
    return data


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
