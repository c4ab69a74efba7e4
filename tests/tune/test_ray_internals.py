"""Every private Ray use (tuner/tune/_ray_internals.py) against the installed Ray, on a real
local Ray: an upgrade that breaks one fails here, naming the Ray version (Ray is pinned to its
tested minor release for these). The two tests that start a local Ray are in the slow tier;
every fast-tier search runs those helpers too, less loudly."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import ray
from adapters import adapter_guard

_adapter = adapter_guard("Ray", ray.__version__, "_ray_internals.py")


def _internals() -> ModuleType:  # imported inside the guard: a broken import says so
    with _adapter("imports"):
        return importlib.import_module("tuner.tune._ray_internals")


def test_the_driver_side_helpers() -> None:
    internals = _internals()
    with _adapter("canonical_gcs_address"):
        assert internals.canonical_gcs_address("10.1.2.3:6379") == "10.1.2.3:6379"
    with _adapter("dashboard_missing"):
        assert isinstance(internals.dashboard_missing(), bool)
    with _adapter("single_node_init"):
        from ray._private import ray_constants

        before = ray_constants.ENABLE_RAY_CLUSTER
        with internals.single_node_init():
            assert ray_constants.ENABLE_RAY_CLUSTER is False
        assert before == ray_constants.ENABLE_RAY_CLUSTER


def test_the_names_and_exits_tuner_reads_are_the_installed_ray_s() -> None:
    """The thread names ray_log routes by, the name of Tune's SIGINT handler and the exit of
    ray.init's SIGTERM handler are read from the installed Ray's own source and behaviour."""
    import inspect

    from ray._private import worker
    from ray.tune import tune

    internals = _internals()
    with _adapter("DRIVER_PRINT_THREADS"):
        source = inspect.getsource(worker.connect)
        assert all(f'"{name}"' in source for name in internals.DRIVER_PRINT_THREADS)
    with _adapter("TUNE_SIGINT_HANDLER"):
        source = inspect.getsource(tune._setup_signal_catching)
        assert f"def {internals.TUNE_SIGINT_HANDLER}(" in source
    with _adapter("init_keeping_sigterm"):
        assert "sys.exit(signum)" in inspect.getsource(worker.init)


def test_tune_s_and_ray_init_s_signal_handlers_are_put_back() -> None:
    """Tune's own handler installation (``_setup_signal_catching``, run as ``Tuner.fit`` runs it)
    inside :func:`fit_keeping_handlers`: the driver's SIGINT and SIGUSR1 handlers come back,
    and a Ctrl-C Tune took is told. ray.init's SIGTERM exit inside :func:`init_keeping_sigterm`
    is Terminated, the driver's handler back after it."""
    import os
    import signal
    import sys
    import time

    from ray.tune import tune

    from tuner.errors import Terminated

    internals = _internals()

    def mine(signum: int, frame: object) -> None:
        raise AssertionError("the driver's own handler ran")

    watched = (signal.SIGINT, signal.SIGUSR1, signal.SIGTERM)
    before = {signum: signal.signal(signum, mine) for signum in watched}
    try:
        with _adapter("fit_keeping_handlers"):
            assert internals.fit_keeping_handlers(tune._setup_signal_catching)[1] is False
            assert all(signal.getsignal(signum) is mine for signum in watched)

            def stopped() -> None:
                tune._setup_signal_catching()
                signal.getsignal(signal.SIGINT)(signal.SIGINT, None)  # Ctrl-C, to Tune

            assert internals.fit_keeping_handlers(stopped)[1] is True
            assert all(signal.getsignal(signum) is mine for signum in watched)
        adapter = _adapter("init_keeping_sigterm")
        with adapter, pytest.raises(Terminated), internals.init_keeping_sigterm():
            signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))  # ray.init's
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs at the next bytecode
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=1, include_dashboard=False, configure_logging=False)
    yield
    if started:
        ray.shutdown()


@pytest.mark.slow
def test_the_cluster_side_helpers_on_a_local_ray(local_ray: None) -> None:
    internals = _internals()
    gcs = ray.get_runtime_context().gcs_address
    with _adapter("driver_node"):
        node = internals.driver_node()
        assert node is not None and int(node.node_manager_port) > 0
    with _adapter("auth_mode_name"):
        assert isinstance(internals.auth_mode_name(), str)
    with _adapter("read_gcs_session_name"):
        internals.read_gcs_session_name(gcs, timeout_s=10)


@pytest.mark.slow
def test_the_trials_of_a_result_grid(local_ray: None) -> None:
    internals = _internals()

    def trainable(config: dict) -> None:
        ray.tune.report({"x": config["x"]})

    tuner = ray.tune.Tuner(
        trainable,
        param_space={"x": 1},
        run_config=ray.tune.RunConfig(verbose=0),
    )
    results = tuner.fit()
    with _adapter("experiment_trials"):
        (trial,) = internals.experiment_trials(results)
        assert trial.status == "TERMINATED" and trial.last_result["x"] == 1


def test_ray_trains_rank_mappings() -> None:
    internals = _internals()
    places = [("a", "10.0.0.1", 1), ("b", "10.0.0.2", 2), ("a", "10.0.0.1", 3)]
    with _adapter("rank_mappings (BackendExecutor._create_rank_world_size_mappings)"):
        local_rank, local_world, node_rank = internals.rank_mappings(places)
    assert local_rank == {0: 0, 1: 0, 2: 1}
    assert local_world == {0: 2, 1: 1, 2: 2}
    assert node_rank == {0: 0, 1: 1, 2: 0}


@pytest.mark.slow
def test_tunes_early_stop_is_recognised(local_ray: None, tmp_path: Path) -> None:
    """A trial Tune stops (here at its second report) ends inside ``tune.report`` with what
    ``is_tune_stop`` recognises, when Tune reuses its process for the next trial (as a
    search's trials do: reuse_actors); the data-parallel trial tells its other ranks then."""
    from ray import tune

    internals = _internals()
    seen = tmp_path / "seen.txt"

    def trainable(config: dict) -> None:
        from ray import tune

        for step in range(1000):
            try:
                tune.report({"step": step})
            except BaseException as exc:
                from tuner.tune._ray_internals import is_tune_stop

                if config["x"] == 1:
                    seen.write_text(f"{type(exc).__name__} {is_tune_stop(exc)} {step}")
                raise

    stop = {"training_iteration": 2}
    run = tune.RunConfig(verbose=0, stop=stop, storage_path=str(tmp_path / "runs"))
    space = {"x": tune.grid_search([1, 2])}
    again = tune.TuneConfig(reuse_actors=True, max_concurrent_trials=1)
    tune.Tuner(trainable, param_space=space, tune_config=again, run_config=run).fit()
    with _adapter("is_tune_stop (tune.report's sys.exit(0) on a stopped trial)"):
        assert seen.exists(), "tune.report raised nothing when Tune stopped the trial"
        kind, recognised, step = seen.read_text().split()
        assert recognised == "True", kind
        assert int(step) >= 1
    assert not internals.is_tune_stop(KeyboardInterrupt())
    assert not internals.is_tune_stop(SystemExit(15))  # a SIGTERM's exit is not Tune's stop
