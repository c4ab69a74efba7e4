"""``tuner report``: an experiment folder -> trials table, report.md / report.html, plots, configs.

Public surface: :func:`write_report` (called by ``tuner search`` at the end of every search and
by ``tuner report``). Implementation lives in the private modules: ``_tables`` (pandas),
``_effects``, ``_importance`` (Optuna), ``_plots`` (matplotlib), ``_recommend``, ``_render``.
"""

from __future__ import annotations

from tuner.report._write import write_report

__all__ = ["write_report"]
