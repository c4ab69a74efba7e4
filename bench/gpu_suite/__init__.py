"""The GPU suite: every CUDA path of the engine measured on a real GPU, one stage per call.

Each stage fits one device call of at most 9 minutes and writes everything it finds into one
folder, ``reports/examples/gpu-<device>/<stage>/`` (Markdown, CSV/JSON, plots, ``stage.json``):
``cuda-tests``, ``ladder``, ``recipe``, ``norms``, ``search``, ``fidelity``. ``--dry-run`` runs
every stage on the CPU with tiny settings (CI does, in under 3 minutes), to check the mechanics.
Entry point, from the project root: ``python -m bench.gpu_suite STAGE|all [--dry-run]``;
bench/README.md has the device commands. It lives in the checkout, not in the installed
package: its ``cuda-tests`` stage runs this checkout's ``tests/engine`` (or ``--tests PATH``).

This file imports nothing, so ``python -m bench.gpu_suite`` can set the threads of a dry run
before torch loads; the stages are in :mod:`bench.gpu_suite._stages`.
"""
