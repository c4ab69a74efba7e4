"""The one guard of the private-API adapters' tests (tuner/tune/_ray_internals.py and
_optuna_internals.py): any break is one failure line naming the library's version."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest


def adapter_guard(
    library: str, version: str, module: str
) -> Callable[[str], AbstractContextManager[None]]:
    """``guard(name)``: a context in which any exception fails the test, naming ``library``'s
    ``version`` and ``module``'s function ``name``."""

    @contextlib.contextmanager
    def guard(name: str) -> Iterator[None]:
        try:
            yield
        except Exception as exc:  # the point: any break, said in one line with the version
            pytest.fail(
                f"{library} {version} broke tuner/tune/{module}'s {name}: {exc!r}; "
                "adapt it (each function says which private API it uses and why)"
            )

    return guard
