"""The collector transport: gzip only where it pays, the kept-alive connection, its errors."""

from __future__ import annotations

import gzip
import json
import os
import socket
import time
from typing import Any

import pytest

from agent.outbox import Outbox
from agent.transport import (
    AHEAD_MIN,
    GZIP_MIN_BYTES,
    SLICE,
    SLOWEST_BYTES_PER_S,
    Rejected,
    Transport,
    Unavailable,
    encode,
    encode_records,
    encode_streams,
    gzip_bytes,
    is_loopback,
)

from .conftest import TOKEN, FakeCollector


def batch(lines: int, text: str = "x" * 40) -> dict[str, Any]:
    return {
        "host": "spark-01",
        "boot_id": "b",
        "samples": [],
        "lines": [{"seq": i, "ts": 1.0, "source": "vllm", "text": text} for i in range(lines)],
        "events": [],
    }


def test_gzip_only_for_big_bodies_and_never_on_loopback(collector: FakeCollector) -> None:
    big = batch(2000)
    assert len(encode(big)) > GZIP_MIN_BYTES
    loopback = Transport(collector.url, TOKEN, timeout=5)
    assert not loopback.compress  # 127.0.0.1: the bytes cost nothing, compressing does
    packed = Transport(collector.url, TOKEN, timeout=5, compress=True)
    sent: list[tuple[int, str | None]] = []
    real_request = packed._conn.request

    def spy(method: str, path: str, body: bytes = b"", headers: Any = None) -> None:
        sent.append((len(body), (headers or {}).get("Content-Encoding")))
        real_request(method, path, body, headers)

    packed._conn.request = spy  # type: ignore[method-assign]
    packed.post(big)
    packed.post(batch(3))
    (big_size, big_encoding), small = sent
    assert big_encoding == "gzip" and big_size < len(encode(big)) // 4
    assert small == (len(encode(batch(3))), None)
    loopback.post(big)
    assert [len(b["lines"]) for b in collector.batches] == [2000, 3, 2000]  # all arrived
    assert gzip.decompress(gzip_bytes(b"abc" * 1000)) == b"abc" * 1000


def test_loopback_addresses() -> None:
    assert all(map(is_loopback, ["127.0.0.1", "127.1.2.3", "localhost", "::1"]))
    assert not any(map(is_loopback, ["10.0.0.2", "collector", "fe80::1", "128.0.0.1"]))


def test_a_kept_alive_connection_the_collector_closed_is_retried_once(
    collector: FakeCollector,
) -> None:
    transport = Transport(collector.url, TOKEN, timeout=5)
    transport.post(batch(1))
    collector.stop()  # ends the kept-alive connection
    collector.start()  # same port
    assert transport.post(batch(2))["stored"]["lines"] == 1  # seq 0 it has: a duplicate
    assert len(collector.batches) == 2


def test_send_then_receive_later(collector: FakeCollector) -> None:
    transport = Transport(collector.url, TOKEN, timeout=5)
    body = batch(5)
    transport.send(body, encode_streams(body))
    answer = transport.receive()
    assert answer["stored"]["lines"] == 5
    assert collector.batches[0]["lines"] == body["lines"]


def test_refused_unavailable_and_rejected(collector: FakeCollector) -> None:
    with pytest.raises(Rejected) as rejected:
        Transport(collector.url, "wrong-token", timeout=5).post(batch(1))
    assert rejected.value.status == 401
    collector.status = 503
    with pytest.raises(Unavailable) as failed:
        Transport(collector.url, TOKEN, timeout=5).post(batch(1))
    assert failed.value.status == 503 and not failed.value.refused
    collector.stop()
    with pytest.raises(Unavailable) as down:
        Transport(collector.url, TOKEN, timeout=5).post(batch(1))
    assert down.value.refused and down.value.status is None


def test_records_encoded_ahead_are_reused_only_for_the_same_list() -> None:
    body = batch(2500)
    ahead = encode_streams(body)
    assert json.loads(encode(body, ahead)) == body
    changed = {**body, "lines": body["lines"][:1], "agent": {"sent_at": 2.0}}
    assert json.loads(encode(changed, ahead)) == changed  # another list: encoded anew
    assert json.loads(encode_records([])) == []
    assert json.loads(encode_records([{"a": "é"}] * 2001)) == [{"a": "é"}] * 2001


def test_small_lists_are_not_encoded_ahead_and_a_small_batch_is_one_call() -> None:
    """Encoding ahead pays for a burst's lists only; a heartbeat or a line or two is cheaper
    as one ``json.dumps`` of the whole batch (what it is is the same JSON)."""
    small = batch(AHEAD_MIN)
    assert encode_streams(small) == {}
    assert json.loads(encode(small, {})) == small == json.loads(encode(small))
    mixed = {**batch(AHEAD_MIN + 1), "events": [{"ts": 1.0, "kind": "x", "data": {}}]}
    ahead = encode_streams(mixed)
    assert set(ahead) == {"lines"}
    assert json.loads(encode(mixed, ahead)) == mixed


def test_a_big_batch_sent_without_encoding_ahead_is_still_encoded_a_slice_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A spool replay, a catch-up or a split batch is sent with nothing encoded ahead: its
    20,000 records in one ``json.dumps`` would hold the GIL for tens of milliseconds."""
    calls: list[int] = []
    dumps = json.dumps

    def counting(obj: Any, **kwargs: Any) -> str:
        lists = [obj] if isinstance(obj, list) else [v for v in obj.values() if isinstance(v, list)]
        calls.append(sum(len(v) for v in lists))
        return dumps(obj, **kwargs)

    big = {**batch(2 * SLICE + 1), "events": [{"ts": 1.0, "kind": "x", "data": {}}]}
    monkeypatch.setattr(json, "dumps", counting)
    body = encode(big)
    monkeypatch.undo()
    assert json.loads(body) == big
    assert max(calls) <= SLICE


def test_a_big_batch_gets_time_in_proportion_to_its_size(collector: FakeCollector) -> None:
    collector.refuse = lambda body: time.sleep(1.0)  # a busy collector: 1 s per batch
    transport = Transport(collector.url, TOKEN, timeout=0.3)
    big = batch(20_000, text="y" * 100)  # ~2.6 MB: 0.3 s + 2.6 s
    assert len(encode(big)) > 2 * SLOWEST_BYTES_PER_S
    assert transport.post(big)["stored"]["lines"] == 20_000
    with pytest.raises(Unavailable, match="timed out"):
        transport.post(batch(1))  # 0.3 s is all a small one gets


def test_the_answer_is_awaited_through_the_given_wait(collector: FakeCollector) -> None:
    """``wait_readable`` (the outbox's: /dev/kmsg is read meanwhile) is asked for the
    connection's socket and the batch's timeout; when it gives up, the batch is unavailable
    (spooled, retried) and the connection, whose answer may still come, is dropped."""
    asked: list[tuple[int, float]] = []
    ready = [True]

    def wait_readable(fd: int, timeout: float) -> bool:
        asked.append((fd, timeout))
        return ready[0]

    transport = Transport(collector.url, TOKEN, timeout=5, wait_readable=wait_readable)
    assert transport.post(batch(1))["stored"]["lines"] == 1
    assert transport._conn.sock is not None
    assert asked == [(transport._conn.sock.fileno(), 5)]
    ready[0] = False
    with pytest.raises(Unavailable, match="timed out waiting"):
        transport.post(batch(2))
    assert transport._conn.sock is None
    assert len(asked) == 3  # the kept-alive connection is tried once more, afresh
    ready[0] = True
    answer = transport.post(batch(3))
    # seqs 0-2 answered, each stored or a duplicate: whether the collector stored the batch
    # whose answer was given up on is its business (it may not have finished reading it)
    assert answer["stored"]["lines"] + answer["duplicates"]["lines"] == 3


def test_a_big_list_is_encoded_in_slices_with_a_call_between_each() -> None:
    """``between`` (the outbox's ``service``: /dev/kmsg read ahead) runs after each slice of
    a burst's batch; the JSON is the same as one ``dumps``."""
    from agent import transport as transport_module

    records = batch(2 * transport_module.SLICE + 5)["lines"]
    calls: list[int] = []
    encoded = encode_records(records, between=lambda: calls.append(1))
    assert json.loads(encoded) == records and len(calls) == 3
    assert (
        encode_records(records[:10], between=lambda: calls.append(1))
        == json.dumps(records[:10], separators=(",", ":")).encode()
    )
    assert len(calls) == 3  # one slice: nothing to do between


def test_a_connection_is_awaited_through_the_given_wait(collector: FakeCollector) -> None:
    """A collector that drops SYNs (a cut network; here a listener with its one backlog
    place taken): the connection is awaited through ``wait_writable`` (the outbox's, which
    reads /dev/kmsg meanwhile), not blocked on for the whole timeout with nothing read. It
    times out all the same; a refusal is still a refusal, an open port still answers."""
    server = socket.create_server(("127.0.0.1", 0), backlog=0)
    port = server.getsockname()[1]
    filler = socket.create_connection(("127.0.0.1", port), 5)
    r, w = os.pipe()
    outbox = Outbox()
    read: list[bytes] = []

    def handler() -> bool:
        read.append(os.read(r, 100))
        return False

    def transport(url: str) -> Transport:
        return Transport(
            url,
            TOKEN,
            timeout=0.3,
            wait_readable=outbox.wait_readable,
            wait_writable=outbox.wait_writable,
        )

    try:
        outbox.watch(r, handler)
        os.write(w, b"a kernel line")
        dropping = transport(f"http://127.0.0.1:{port}")
        dropping.send(batch(1))
        assert read == [b"a kernel line"]  # read while the connection was awaited
        with pytest.raises(Unavailable, match="timed out") as timed_out:
            dropping.receive()
        assert not timed_out.value.refused
        assert transport(collector.url).post(batch(1))["stored"]["lines"] == 1
        collector.stop()
        with pytest.raises(Unavailable) as down:
            transport(collector.url).post(batch(1))
        assert down.value.refused
    finally:
        for fd in (r, w):
            os.close(fd)
        filler.close()
        server.close()
