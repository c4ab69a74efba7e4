"""What a search returns and :func:`tuner.load` reads back (pandas and the answer load when a
field is read)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_RUNTIME, EXIT_TERMINATED

if TYPE_CHECKING:
    import pandas as pd

    from tuner.answer import Answer
    from tuner.config import TrainConfig
    from tuner.experiment import Experiment

__all__ = ["SearchResult"]


@dataclass(frozen=True)
class SearchResult:
    """A search's results: its experiment folder read back (after re-measurement and effects),
    the answer decided once on it, and the report folder (None: no report written)."""

    experiment: Experiment
    answer: Answer
    report_dir: Path | None = None
    state: str = "finished"  # finished | interrupted (continue with resume=True)
    terminated: bool = False  # a SIGTERM, not Ctrl-C, stopped it (exit 143, not 130)

    @property
    def exit_code(self) -> int:
        """``tuner search``'s exit code: 0 a usable trial, 1 none, 130 Ctrl-C, 143 SIGTERM."""
        if self.state != "finished":
            return EXIT_TERMINATED if self.terminated else EXIT_INTERRUPTED
        return EXIT_OK if self.usable else EXIT_RUNTIME

    @property
    def experiment_dir(self) -> Path:
        return Path(self.experiment.path)

    @property
    def trials(self) -> pd.DataFrame:
        """One row per trial: the same table (columns and dtypes) as ``trials.csv``."""
        from tuner.time_to_target import with_time_to_target

        return with_time_to_target(self.experiment.trials, self.answer.trials)

    @property
    def recommended(self) -> TrainConfig | None:
        """The recommended run config (None: no usable trial)."""
        row = self.answer.recommended
        if row is None:
            return None
        from tuner.record import TRIAL_ID

        return self.answer.configs.get(str(row[TRIAL_ID]))

    @property
    def answer_text(self) -> str:
        """The answer in one sentence, as the report's first line gives it."""
        return self.answer.headline()

    @property
    def usable(self) -> int:
        """How many trials can be recommended (kind ok, every objective measured)."""
        return self.answer.candidates
