"""Each run compiles as a fresh process would: nothing an earlier run compiled carries over.

Without that, a compiled run after another compiled run of the same model class but other
shapes is a recompile in which dynamo marks the changed dimensions dynamic: a symbolic compile
that took over 10 minutes on 2 CPU cores (and on a GPU, max-autotune's CUDA-graph pool of the
earlier run would count in the next run's reserved memory; see test_engine_cuda.py).
"""

from __future__ import annotations

import pytest
from engine_helpers import tiny

from tuner.engine import short_run


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_compiled_run_after_another_of_other_shapes_compiles_afresh() -> None:
    first = short_run(tiny(compile="default", batch_size=32, img_size=32), steps=1)
    second = short_run(tiny(compile="default", batch_size=16, img_size=16), steps=1)
    assert first.status == second.status == "ok", (first.error, second.error)
    assert second.effective["compile"] == "default"
