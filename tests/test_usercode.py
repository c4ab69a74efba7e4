"""tuner.usercode on its own (no torch, no training): how a reference to the user's code is
resolved, what one line a failure becomes, and what Ray must ship for it. The engine's and the
search's tests run the same code on real models and datasets; these pin the branches they reach
only on a cluster or with a mistake no example makes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tuner import usercode
from tuner.usercode import (
    UserCodeError,
    call_user,
    load_file_module,
    py_modules,
    register,
    resolve,
)


def test_arguments_a_function_does_not_take_are_named_before_it_is_called() -> None:
    calls: list[int] = []

    def build_model(num_classes: int) -> None:
        calls.append(num_classes)

    with pytest.raises(UserCodeError) as caught:
        call_user(build_model, 10, what="model='mine:build_model'", width=4)
    assert str(caught.value).startswith(
        "model='mine:build_model': test_arguments_a_function_does_not_take_are_named_before_it_"
        "is_called.<locals>.build_model() does not take these arguments ("
    )
    assert str(caught.value).endswith(
        "it must accept 1 positional argument(s) and the keywords width."
    )
    assert calls == []  # refused before the call
    assert call_user(max, 3, 4, what="model") == 4  # a builtin without a signature: called


def test_a_file_that_raises_on_import_is_one_line_naming_its_line(tmp_path: Path) -> None:
    broken = tmp_path.resolve() / "broken_factories.py"  # as load_file_module names it
    broken.write_text("import math\n\nvalue = math.sqrt(-1)\n")
    with pytest.raises(UserCodeError) as caught:
        load_file_module(broken, what="model='broken_factories.py:build':")
    assert str(caught.value) == (
        f"model='broken_factories.py:build': file {broken} failed to import: "
        f"ValueError: math domain error at {broken}:3."
    )
    assert not any(name.endswith("broken_factories_" + str(abs(hash(str(broken)))))
                   for name in sys.modules)  # fmt: skip
    with pytest.raises(UserCodeError, match=r"file .*absent.py does not exist; check the path"):
        load_file_module(tmp_path / "absent.py", what="data:")


def test_an_unregistered_notebook_name_says_to_pass_the_object_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(usercode, "_REGISTERED", {})  # nothing registered here reaches a search
    with pytest.raises(UserCodeError) as caught:
        resolve("@never_registered:build_model", what="model")
    assert str(caught.value) == (
        "model='@never_registered:build_model': @never_registered is not registered in this "
        "process; pass the object to tuner.search/tuner.train again, or use an importable module."
    )

    class Notebook:
        @staticmethod
        def build_model(num_classes: int) -> int:
            return num_classes

    key = register("notebook_of_this_test", Notebook)
    assert resolve(f"{key}:build_model", what="model")(7) == 7


def test_ray_ships_each_users_file_and_top_level_package_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp_path = tmp_path.resolve()  # as py_modules names what it ships
    package = tmp_path / "my_models"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "nets.py").write_text("def build_model(num_classes):\n    return None\n")
    (tmp_path / "my_data.py").write_text("def build_data():\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    factories = tmp_path / "factories.py"
    refs = [
        f"{factories}:build_model",
        f"{factories}:build_data",  # the same file: shipped once
        "my_models.nets:build_model",  # a package's module: its whole top-level package
        "my_data:build_data",  # a top-level module file
        "@notebook:build_model",  # registered objects travel with the trainable
        "tuner.workloads:something",  # tuner itself is installed on every node
        "torch.nn:Linear",  # an installed library
        "vit_tiny_r_s16_p8_224",  # a timm name, no reference at all
    ]
    assert py_modules(refs) == [str(factories), str(package), str(tmp_path / "my_data.py")]
