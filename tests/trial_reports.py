"""A trial's reports as Tune wrote them to its ``result.json``, read while the search may still
be writing, spelled once for the tests that watch a running search."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def written_reports(result_json: Path) -> list[dict[str, Any]]:
    """The whole lines of ``result_json``: Tune writes a long line in several chunks, and a line
    read half written is not JSON (reading one once ended a test's watcher thread silently)."""
    whole = result_json.read_text().split("\n")[:-1]
    return [json.loads(line) for line in whole if line.strip()]
