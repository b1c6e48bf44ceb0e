"""A round-robin HTTP/1.1 reverse proxy in front of collector replicas, for tests and benches.

Each request (not each client connection: agents keep theirs alive) goes to the next upstream
in turn, so one host's batches alternate between the replicas. As nginx's default
``proxy_next_upstream error``: an upstream that refuses the connection is skipped for the
next; one that fails after the request went out answers 502 (a POST is not sent twice).

    with RoundRobinProxy(["http://127.0.0.1:8081", "http://127.0.0.1:8082"]) as proxy:
        agent --collector proxy.url
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from types import TracebackType
from urllib.parse import urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}


class RoundRobinProxy:
    """``start()``/``stop()`` or a context manager; ``url`` once started; ``sent`` counts the
    requests each upstream answered."""

    def __init__(self, upstreams: list[str], *, timeout_s: float = 60.0) -> None:
        self.upstreams = [
            (u.hostname or "127.0.0.1", u.port or 80) for u in map(urlsplit, upstreams)
        ]
        self.timeout_s = timeout_s
        self.sent: Counter[int] = Counter()  # upstream index → requests it answered
        self.failed = 0  # 502s given
        self._next = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RoundRobinProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._client, "127.0.0.1", 0), self._loop
        ).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> RoundRobinProxy:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await _read_message(reader, request=True)
                if request is None:
                    break
                head, body, keep = request
                response = await self._forward(head, body)
                writer.write(_with_connection(response, keep))
                await writer.drain()
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()

    async def _forward(self, head: list[str], body: bytes) -> tuple[list[str], bytes]:
        """The upstream's whole response, from the first upstream that takes the connection."""
        start = self._next
        self._next = (self._next + 1) % len(self.upstreams)
        for i in range(len(self.upstreams)):
            index = (start + i) % len(self.upstreams)
            try:
                reader, writer = await asyncio.open_connection(*self.upstreams[index])
            except OSError:
                continue  # refused: the next upstream
            try:
                writer.write(_with_connection((head, body), keep=False))
                await writer.drain()
                answer = await asyncio.wait_for(
                    _read_message(reader, request=False), self.timeout_s
                )
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
                answer = None
            finally:
                writer.close()
            if answer is None:
                break  # the request may have been taken: never send it twice
            self.sent[index] += 1
            return answer[0], answer[1]
        self.failed += 1
        return ["HTTP/1.1 502 Bad Gateway"], b""


async def _read_message(
    reader: asyncio.StreamReader, *, request: bool
) -> tuple[list[str], bytes, bool] | None:
    """(start line + headers, body, keep-alive) of one message; None at a clean EOF. Bodies by
    content-length, or (responses) up to EOF."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise
    head = raw.decode("latin-1").split("\r\n")[:-2]
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])}
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise ValueError("chunked bodies are not proxied")
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    else:
        body = b"" if request else await reader.read()
    keep = headers.get("connection", "").lower() != "close" and head[0].endswith("HTTP/1.1")
    return head, body, keep


def _with_connection(message: tuple[list[str], bytes], keep: bool) -> bytes:
    head, body = message
    lines = [head[0]] + [
        h for h in head[1:] if h.partition(":")[0].strip().lower() not in HOP_BY_HOP
    ]
    if not any(h.lower().startswith("content-length:") for h in lines):
        lines.append(f"content-length: {len(body)}")
    lines.append("connection: keep-alive" if keep else "connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
