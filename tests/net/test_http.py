"""The one bounded HTTP request both HTTP readers use, against a real loopback server: gzip in one or several members
or cut short, an error answer's body, a cancelled operation, a deadline shared by several requests."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator

import pytest

from gpuscope.net.http import Deadline, FetchError, fetch, request
from tests import hostile as H

BOUND_S = 30.0


@pytest.fixture
def server() -> Iterator[H.Hostile]:
    s = H.Hostile()
    yield s
    s.close()


def get(server: H.Hostile, *, seconds: float = 10.0, max_bytes: int = 1 << 20,
        deadline: Deadline | None = None) -> bytes:
    return fetch(request(server.url + "/x"), deadline=deadline or Deadline(seconds), max_bytes=max_bytes).body


def test_gzip_in_several_members_is_read_whole(server: H.Hostile) -> None:
    body = b"a" * 100_000 + b"b" * 50_000
    packed = gzip.compress(body[:70_000]) + gzip.compress(body[70_000:])
    server.behave = lambda r: H.answer(200, packed, headers={"Content-Encoding": "gzip"})
    assert get(server) == body


def test_a_gzip_stream_cut_short_is_a_bad_answer(server: H.Hostile) -> None:
    packed = gzip.compress(b"x" * 100_000)[:-20]
    server.behave = lambda r: H.answer(200, packed, headers={"Content-Encoding": "gzip"})
    with pytest.raises(FetchError, match=r"gzip stream cut short") as caught:
        get(server)
    assert caught.value.kind == "bad_answer"


def test_the_cap_counts_inflated_bytes(server: H.Hostile) -> None:
    packed = gzip.compress(bytes(4 << 20))  # 4 MiB of zeros in about 4 kB
    server.behave = lambda r: H.answer(200, packed, headers={"Content-Encoding": "gzip"})
    with pytest.raises(FetchError, match="answer larger than 1 MiB") as caught:
        get(server)
    assert caught.value.kind == "too_large"
    assert len(get(server, max_bytes=4 << 20)) == 4 << 20


def test_an_error_answer_keeps_its_status_its_first_bytes_and_retry_after(server: H.Hostile) -> None:
    server.behave = lambda r: H.answer(503, gzip.compress(b"busy " * 100_000),
                                       headers={"Content-Encoding": "gzip", "Retry-After": "7"})
    with pytest.raises(FetchError) as caught:
        get(server)
    error = caught.value
    assert (error.kind, error.status, error.retry_after_s) == ("status", 503, 7.0)
    assert error.body == (b"busy " * 100_000)[: 1 << 16]


def test_cancelling_ends_the_requests_in_flight_at_once(server: H.Hostile) -> None:
    server.behave = lambda r: H.hang
    deadline = Deadline(60)
    outcomes: list[str] = []

    def one() -> None:
        try:
            get(server, deadline=deadline)
        except FetchError as exc:
            outcomes.append(exc.kind)

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    while len(server.requests) < 3:
        time.sleep(0.01)
    start = time.monotonic()
    deadline.cancel()
    for t in threads:
        t.join(BOUND_S)
    assert time.monotonic() - start < BOUND_S
    assert outcomes == ["cancelled"] * 3
    with pytest.raises(FetchError, match="cancelled"):
        get(server, deadline=deadline)


def test_one_deadline_for_several_requests(server: H.Hostile) -> None:
    """Three requests of 1 s each under one deadline of 2.5 s: the last cannot finish; it ends at the deadline."""
    def slow(request: H.Request) -> H.Act:
        def act(sock: object, hostile: H.Hostile) -> None:
            hostile.closed.wait(1.0)
            H.answer(200, b"ok")(sock, hostile)  # type: ignore[arg-type]
        return act

    server.behave = slow
    deadline = Deadline(2.5)
    kinds = []
    for _ in range(3):
        try:
            get(server, deadline=deadline)
            kinds.append("ok")
        except FetchError as exc:
            kinds.append(exc.kind)
    assert kinds[0] == "ok" and kinds[2] == "timeout"
    assert deadline.left_s() <= 0
