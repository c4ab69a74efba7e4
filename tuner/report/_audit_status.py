"""What claims.json says it is (its format, written by the report writer: see
:data:`tuner.report.claims.FORMAT`), and the auditor's check that a report of that format has
the records such a report always places: one deleted is named, even in a report checked without
its experiment (with it, :func:`tuner.report._audit_claims.check_claims_kept` names every
one)."""

from __future__ import annotations

import json
from pathlib import Path

from tuner.experiment import CLAIMS_FILE
from tuner.report._audit_text import Finding
from tuner.report.claims import FORMAT, FORMAT_KEY, Claim

__all__ = ["REQUIRED_KINDS", "check_format", "read_format"]

# The records a report of FORMAT 1 always places: its details' counts, wall time, load, state
# and re-measurement rows (tuner.report._write._summary).
REQUIRED_KINDS = ("counts", "wall_time", "machine_load", "state", "remeasure_rows")


def read_format(path: Path) -> int | None:
    """The format claims.json says it is written in (None: a report from before it; a file
    that does not parse is tuner.report._audit_claims.claims_of's to say)."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    found = document.get(FORMAT_KEY) if isinstance(document, dict) else None
    return found if isinstance(found, int) and not isinstance(found, bool) else None


def check_format(claims: list[Claim], version: int | None) -> list[Finding]:
    """A report of a known format holds a record of each kind it always places; a format this
    auditor does not know is said (None: an older report, checked as before)."""
    if version is None:
        return []
    if version != FORMAT:
        why = f"it says {FORMAT_KEY} {version}; this tuner writes and checks {FORMAT}"
        return [Finding("claim", CLAIMS_FILE, f"{FORMAT_KEY} {version}", why)]
    kinds = {claim.kind for claim in claims}
    return [
        Finding(
            "claim",
            CLAIMS_FILE,
            kind,
            f"{CLAIMS_FILE} says {FORMAT_KEY} {version} (every section a record) and has no "
            f"{kind} record: the report states it, nothing checks it",
        )
        for kind in REQUIRED_KINDS
        if kind not in kinds
    ]
