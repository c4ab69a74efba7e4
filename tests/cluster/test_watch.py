"""watch(): a server the driver depends on that stops accepting connections is reported once,
after its grace period; one that answers, or a brief silence, is not (real sockets)."""

from __future__ import annotations

import socket
import threading
import time

from tuner.tune.cluster import Endpoint, watch


def _listen(port: int = 0) -> tuple[socket.socket, int]:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen()
    return server, server.getsockname()[1]


def _endpoint(port: int, grace_s: float) -> Endpoint:
    return Endpoint("the test server", "127.0.0.1", port, grace_s)


def test_a_server_that_stops_answering_is_reported_once_with_what_was_lost() -> None:
    server, port = _listen()
    lost: list[str] = []
    reported = threading.Event()

    def on_lost(what: str) -> None:
        lost.append(what)
        reported.set()

    with watch(on_lost, endpoints=[_endpoint(port, grace_s=1.0)]):
        time.sleep(1.5)
        assert not lost  # it answers
        server.close()
        assert reported.wait(timeout=10)
        time.sleep(1.5)
    assert lost == ["the test server"]


def test_a_silence_shorter_than_the_grace_period_is_not_a_loss() -> None:
    server, port = _listen()
    lost: list[str] = []
    with watch(lost.append, endpoints=[_endpoint(port, grace_s=30.0)]):
        server.close()
        time.sleep(2.0)
        server, _ = _listen(port)  # back, as a restarted GCS would be
        time.sleep(1.0)
    server.close()
    assert lost == []
