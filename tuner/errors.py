"""The project's error type: one line for people, a traceback only with ``--debug``."""

from __future__ import annotations

__all__ = ["TunerError"]


class TunerError(Exception):
    """A problem the user can fix. Its message names what is wrong and how to fix it.

    The CLI prints it as one line (``error: ...``) without a traceback.
    """
