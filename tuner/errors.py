"""The project's errors: one line for people, a traceback only with ``--debug``; the exit code
says what kind of problem stopped ``tuner`` (``python -m tuner --help`` lists them)."""

from __future__ import annotations

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_RUNTIME",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "RUNTIME_PACKAGES",
    "MissingPackage",
    "Terminated",
    "TunerError",
    "TunerRuntimeError",
    "error_line",
]

EXIT_OK = 0  # finished, with at least one usable trial where the command searches
EXIT_RUNTIME = 1  # finished with nothing usable, or a runtime error stopped it
EXIT_USAGE = 2  # a usage error: nothing ran
EXIT_INTERRUPTED = 130  # Ctrl-C: a search can be resumed
EXIT_TERMINATED = 143  # SIGTERM (128 + 15; SLURM, Kubernetes, systemd): handled as Ctrl-C is


class Terminated(KeyboardInterrupt):
    """SIGTERM, taken as Ctrl-C is: every step that stops cleanly on Ctrl-C stops the same way;
    only the exit code differs."""

    exit_code = EXIT_TERMINATED


class TunerError(Exception):
    """A problem the user can fix, found before anything ran; its message names what is wrong
    and how to fix it. The CLI prints it as ``error: ...`` and exits with :attr:`exit_code`."""

    exit_code = EXIT_USAGE


class TunerRuntimeError(TunerError):
    """A problem that stopped work under way (the Ray cluster was lost); its message says how
    to continue (``--resume``)."""

    exit_code = EXIT_RUNTIME


# The module each runtime dependency in pyproject.toml is imported as -> its distribution
# (tests/test_dependencies.py keeps the two alike): a missing one is named with its fix.
_SAME_NAME = "torch torchvision timm optuna pandas numpy scipy tensorboardX pyarrow matplotlib"
_SAME_NAME += " tqdm platformdirs psutil filelock"
RUNTIME_PACKAGES = {module: module for module in _SAME_NAME.split()}
RUNTIME_PACKAGES |= {"ray": "ray[tune]", "PIL": "pillow", "sklearn": "scikit-learn"}


class MissingPackage(TunerRuntimeError):
    """A runtime dependency this Python lacks, met at its first import (imports are lazy, so
    work may have started: a runtime error, exit 1, not a usage error)."""

    @classmethod
    def of(cls, exc: ModuleNotFoundError) -> MissingPackage | None:
        """The error for ``exc`` when a declared dependency is missing; else None (a bug)."""
        module = (exc.name or "").split(".")[0]
        if module not in RUNTIME_PACKAGES:
            return None
        import sys

        package = RUNTIME_PACKAGES[module]
        return cls(
            f"tuner needs the package '{package}', which {sys.executable} cannot import "
            f"(no module named '{exc.name}'): pip install '{package}' (or pip install -e . in the "
            "project for every dependency)"
        )


def error_line(exc: BaseException, *, limit: int = 300) -> str:
    """``Type: message``, its first line cut to ``limit`` characters."""
    return f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:limit]
