"""``tuner report``: an experiment folder -> trials table, report.md / report.html, plots, configs.

Public surface: :func:`write_report` (called by ``tuner search`` at the end of every search, with
the experiment and answer it has, and by ``tuner report``). Implementation lives in the private
modules: ``_write`` (the sections), ``_answer`` (section 1), ``_effects`` (technique tables),
``_speed`` (section 4), ``_scaling`` (world sizes), ``_status`` (how far the experiment got),
``_importance`` (Optuna), ``_plots`` (matplotlib), ``_configs`` (the recommended configs in
words and as files), and ``document`` (the document model and its Markdown/HTML rendering).
"""

from __future__ import annotations

from tuner.report._write import write_report

__all__ = ["write_report"]
