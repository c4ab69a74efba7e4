"""The Ray side of a search: Ray Tune trials driven by Optuna's samplers, under a memory budget.
``SearchDriver(SearchOptions(space="vit_space", ...)).run()`` runs (or resumes) one experiment;
ray and torch load on first use, so importing this package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuner.experiment.options import OBJECTIVES, SAMPLERS, SearchOptions

if TYPE_CHECKING:
    from tuner.tune.driver import SearchDriver

__all__ = [
    "OBJECTIVES",
    "SAMPLERS",
    "SearchDriver",
    "SearchOptions",
]


def __getattr__(name: str) -> Any:
    if name == "SearchDriver":
        from tuner.tune import driver

        return getattr(driver, name)
    raise AttributeError(f"module 'tuner.tune' has no attribute {name!r}")
