"""The Ray side of a search: Ray Tune trials driven by Optuna's samplers, under a memory budget
(``tuner.search``, the Python API's function in :mod:`tuner.api`, runs it).

``run_search(SearchOptions(space="vit_space", ...))`` runs (or resumes) one experiment; its
options are the experiment's (:mod:`tuner.experiment.options`, named here too). The heavy parts
(ray, torch) load on first use, so importing this package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuner.experiment.options import OBJECTIVES, SAMPLERS, SearchOptions

if TYPE_CHECKING:
    from tuner.tune.run import SearchOutcome, run_search

__all__ = [
    "OBJECTIVES",
    "SAMPLERS",
    "SearchOptions",
    "SearchOutcome",
    "run_search",
]


def __getattr__(name: str) -> Any:
    if name in ("run_search", "SearchOutcome"):
        from tuner.tune import run

        return getattr(run, name)
    raise AttributeError(f"module 'tuner.tune' has no attribute {name!r}")
