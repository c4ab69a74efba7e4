"""``tuner report``: an experiment folder -> trials table, report.md / report.html, plots, configs.

:func:`write_report` is the public surface (``tuner search`` and ``tuner report`` call it); the
private modules are listed in docs/architecture.md.
"""

from __future__ import annotations

from tuner.report._write import write_report

__all__ = ["write_report"]
