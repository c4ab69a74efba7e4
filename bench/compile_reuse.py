"""Does a trial's run reuse what its compile probe built? Compile's first build, timed three ways.

1. a fresh process with an empty Inductor cache (``TORCHINDUCTOR_CACHE_DIR``): the first build;
2. the same process, a second run of the same config (what a trial's own run is after its
   probe: :func:`tuner.engine.short_run` resets dynamo between runs, so only Inductor's caches
   can carry over);
3. a fresh process with the cache the first one left (a later trial, another Ray worker).

Each run is :func:`tuner.engine.short_run` of the vit_space CPU workload with
``compile="default"``; the build is its training seconds less its steps at the steady step time.

    .venv/bin/python bench/compile_reuse.py     # a few minutes on 2 CPU cores
Writes reports/benchmarks/compile_reuse.json and .md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports" / "benchmarks"
STEPS = 3


def _one_process(runs: int) -> list[dict[str, Any]]:
    """``runs`` compiled short runs in this process: each one's build seconds."""
    from tuner.engine import short_run
    from tuner.engine.build import warmup_steps_of
    from tuner.spaces import get_space, train_config_of

    workload = dict(get_space("vit_space").workloads["cpu"])
    config = train_config_of(
        {"batch_size": 64, "compile": "default"}, workload={**workload, "device": "cpu"}
    )
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        result = short_run(config, steps=STEPS)
        steps = warmup_steps_of(config) + STEPS
        build = result.train_time_s - steps * (result.step_time_s or 0.0)
        out.append({"status": result.status, "build_s": round(build, 2),
                    "wall_s": round(time.perf_counter() - started, 2),
                    "step_time_s": result.step_time_s})  # fmt: skip
    return out


def _child(cache: str, runs: int) -> list[dict[str, Any]]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
    code = f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); "
    code += "from bench.compile_reuse import _one_process; "
    code += f"print(json.dumps(_one_process({runs})))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    with tempfile.TemporaryDirectory() as cache:
        first_process = _child(cache, 2)  # an empty cache: the first build, then a rerun
        later_process = _child(cache, 1)  # the cache the first process left
    record = {
        "when": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "first build (fresh process, empty cache)": first_process[0],
        "second run, same process": first_process[1],
        "fresh process, warm cache": later_process[0],
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "compile_reuse.json").write_text(json.dumps(record, indent=1) + "\n")
    lines = ["# Compile's first build, and what reuses it", "", __doc__.split("\n\n")[1], "",
             "| run | build s | wall s |", "|---|---|---|"]  # fmt: skip
    for name, row in record.items():
        if isinstance(row, dict):
            lines.append(f"| {name} | {row['build_s']} | {row['wall_s']} |")
    lines += ["", f"Measured {record['when']} UTC on this machine (2 CPU cores), one run each."]
    (OUT / "compile_reuse.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
