"""The search: Ray Tune trials driven by Optuna's samplers, under a memory budget.

``run_search(SearchOptions(space="vit_space", ...))`` runs (or resumes) one experiment. The
heavy parts (ray, torch) load on first use, so importing this package stays cheap.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from tuner.search.options import OBJECTIVES, SearchOptions
from tuner.search.samplers import SAMPLERS

if TYPE_CHECKING:
    from tuner.search.run import SearchOutcome, run_search

__all__ = [
    "OBJECTIVES",
    "SAMPLERS",
    "SearchOptions",
    "SearchOutcome",
    "run_search",
]


def __getattr__(name: str) -> Any:
    if name in ("run_search", "SearchOutcome"):
        from tuner.search import run

        return getattr(run, name)
    raise AttributeError(f"module 'tuner.search' has no attribute {name!r}")


class _CallableSearch(types.ModuleType):
    """``tuner.search(space, **options)`` is the API's function (:func:`tuner.api.search`);
    once this package is imported, Python binds it over that attribute of ``tuner``, so the
    package answers the call the same way."""

    def __call__(self, space: Any, **options: Any) -> Any:
        from tuner.api import search

        return search(space, **options)


sys.modules[__name__].__class__ = _CallableSearch
