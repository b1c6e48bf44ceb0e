"""The seeded growing tool-call conversation workload.

``ToolConversation.run()`` drives ``sessions`` concurrent conversations (one thread each)
against an OpenAI-compatible ``/v1/chat/completions``, writes one JSONL record per request and
fsyncs it before that session's next request, and returns a ``WorkloadResult``. Cancel it from
any thread with the ``threading.Event`` it was given: in-flight requests are abandoned at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from collector.matrix.results import WorkloadResult, percentile
from collector.matrix.spec import ToolConversationSpec
from collector.matrix.toolcalls import (
    SYSTEM_PROMPT,
    TOOLS,
    check_tool_calls,
    choose_call,
    correction_prompt,
    tool_result,
    user_prompt,
)

CHAT_PATH = "/v1/chat/completions"


@dataclass
class _Reply:
    status: int | None = None
    body: dict[str, Any] | None = None
    error: str | None = None
    timeout: bool = False
    cancelled: bool = False


class ToolConversation:
    """One tool_conversation workload run; construct, then call `run()` once."""

    def __init__(
        self,
        params: ToolConversationSpec,
        *,
        base_url: str,
        model: str,
        jsonl_path: Path,
        cancel: threading.Event | None = None,
        tags: dict[str, Any] | None = None,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        fsync: Callable[[int], None] = os.fsync,
    ) -> None:
        self.params = params
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.jsonl_path = Path(jsonl_path)
        self.cancel = cancel or threading.Event()
        self.tags = dict(tags or {})
        self._transport = transport
        self._clock = clock
        self._monotonic = monotonic
        self._fsync = fsync
        self._lock = threading.Lock()
        self._records: list[dict[str, Any]] = []
        self._stop_reasons: dict[str, str] = {}

    def run(self) -> WorkloadResult:
        started = self._clock()
        self.jsonl_path.parent.mkdir(parents=True, exist_ok=True)
        with self.jsonl_path.open("a", encoding="utf-8") as self._out:
            threads = [
                threading.Thread(target=self._session, args=(s,), name=f"tool-conv-{s}")
                for s in range(self.params.sessions)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        return self._summary(started, self._clock())

    def _client(self) -> httpx.Client:
        # The deadline is enforced by `_post`; httpx's own timeout only bounds abandoned threads.
        timeout = httpx.Timeout(self.params.request_timeout_s + 5.0)
        return httpx.Client(base_url=self.base_url, timeout=timeout, transport=self._transport)

    def _session(self, session: int) -> None:
        try:
            with self._client() as client:
                reason = self._converse(client, session)
        except Exception as exc:  # one broken session must not take the others down
            reason = f"crashed: {exc!r}"
        self._stop_reasons[str(session)] = reason

    def _converse(self, client: httpx.Client, session: int) -> str:
        p = self.params
        rng = random.Random(f"{p.seed}:{session}")
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
        for turn in range(1, p.max_turns + 1):
            name, args = choose_call(rng)
            messages.append({"role": "user", "content": user_prompt(turn, name, args)})
            tool_retries = error_retries = 0
            attempt = 0
            while True:
                if self.cancel.is_set():
                    return "cancelled"
                attempt += 1
                reply, record = self._request(client, session, turn, attempt, messages)
                if reply.cancelled:
                    return "cancelled"
                if reply.error is not None:
                    error_retries += 1
                    if error_retries > p.max_error_retries:
                        return "errors"
                    continue
                message = record["_message"]
                if not record["tool_check"]["valid"]:
                    tool_retries += 1
                    if tool_retries > p.max_tool_retries:
                        return "malformed_tool_calls"
                    # Like an agent: keep what the model said, tell it what was wrong, re-ask.
                    messages.append({"role": "assistant", "content": message.get("content") or ""})
                    problems = record["tool_check"]["problems"]
                    messages.append(
                        {"role": "user", "content": correction_prompt(name, args, problems)}
                    )
                    continue
                calls = [
                    {"id": c["id"], "type": "function", "function": c["function"]}
                    for c in message["tool_calls"]
                ]
                messages.append(
                    {"role": "assistant", "content": message.get("content"), "tool_calls": calls}
                )
                for index, call in enumerate(calls):
                    content = tool_result(p.seed, session, turn, index, p.tool_result_bytes)
                    messages.append(
                        {"role": "tool", "tool_call_id": call["id"], "content": content}
                    )
                break
            if (record["prompt_tokens"] or 0) >= p.target_prompt_tokens:
                return "target_prompt_tokens"
        return "max_turns"

    def _request(
        self,
        client: httpx.Client,
        session: int,
        turn: int,
        attempt: int,
        messages: list[dict[str, Any]],
    ) -> tuple[_Reply, dict[str, Any]]:
        p = self.params
        body = json.dumps(
            {
                "model": self.model,
                "messages": messages,
                "tools": TOOLS,
                "tool_choice": "auto",
                "max_tokens": p.max_tokens,
                "temperature": p.temperature,
                "seed": p.seed,
            },
            sort_keys=True,
        ).encode()
        started, t0 = self._clock(), self._monotonic()
        reply = self._post(client, body)
        latency = self._monotonic() - t0
        choice = ((reply.body or {}).get("choices") or [{}])[0]
        usage = (reply.body or {}).get("usage") or {}
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        record: dict[str, Any] = {
            **self.tags,
            "workload": p.name,
            "session": session,
            "turn": turn,
            "attempt": attempt,
            "started_at": started,
            "ended_at": self._clock(),
            "latency_s": round(latency, 6),
            "status": reply.status,
            "prompt_tokens": usage.get("prompt_tokens"),
            "completion_tokens": usage.get("completion_tokens"),
            "finish_reason": choice.get("finish_reason"),
            "error": reply.error,
            "timeout": reply.timeout,
            "cancelled": reply.cancelled,
            "tool_check": None if reply.error or reply.cancelled else check_tool_calls(message),
            "request_bytes": len(body),
            "request_sha256": hashlib.sha256(body).hexdigest(),
        }
        self._write(record)
        return reply, {**record, "_message": message}

    def _post(self, client: httpx.Client, body: bytes) -> _Reply:
        """POST with a hard total deadline, abandoning the request on cancel or timeout."""
        box: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                box["response"] = client.post(
                    CHAT_PATH, content=body, headers={"Content-Type": "application/json"}
                )
            except Exception as exc:
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=work, daemon=True, name="tool-conv-request").start()
        deadline = self._monotonic() + self.params.request_timeout_s
        while not done.wait(min(0.05, max(0.0, deadline - self._monotonic()))):
            if self.cancel.is_set():
                return _Reply(cancelled=True)
            if self._monotonic() >= deadline:
                return _Reply(error="timeout", timeout=True)
        if "error" in box:
            exc = box["error"]
            timed_out = isinstance(exc, httpx.TimeoutException)
            return _Reply(error=f"{type(exc).__name__}: {exc}", timeout=timed_out)
        response: httpx.Response = box["response"]
        if response.status_code // 100 != 2:
            return _Reply(
                status=response.status_code,
                error=f"HTTP {response.status_code}: {response.text[:300]}",
            )
        try:
            parsed = response.json()
        except ValueError:
            return _Reply(status=response.status_code, error="response body is not JSON")
        if not isinstance(parsed, dict):
            return _Reply(status=response.status_code, error="response body is not an object")
        return _Reply(status=response.status_code, body=parsed)

    def _write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True) + "\n"
        with self._lock:
            self._out.write(line)
            self._out.flush()
            self._fsync(self._out.fileno())
            self._records.append(record)

    def _summary(self, started: float, ended: float) -> WorkloadResult:
        records = self._records
        latencies = [r["latency_s"] for r in records if not r["cancelled"]]
        prompts = [r["prompt_tokens"] for r in records if r["prompt_tokens"] is not None]
        reasons = dict(sorted(self._stop_reasons.items()))
        if self.cancel.is_set() or "cancelled" in reasons.values():
            outcome = "cancelled"
        elif all(r in ("target_prompt_tokens", "max_turns") for r in reasons.values()):
            outcome = "ok"
        else:
            outcome = "failed"
        return WorkloadResult(
            name=self.params.name,
            outcome=outcome,
            started_at=started,
            ended_at=ended,
            requests=len(records),
            errors=sum(1 for r in records if r["error"] is not None),
            timeouts=sum(1 for r in records if r["timeout"]),
            latency_median_s=statistics.median(latencies) if latencies else None,
            latency_p95_s=percentile(latencies, 0.95),
            latency_max_s=max(latencies) if latencies else None,
            over_30s=sum(1 for x in latencies if x > self.params.slow_request_s),
            max_prompt_tokens=max(prompts) if prompts else None,
            malformed_tool_calls=sum(
                1 for r in records if r["tool_check"] and not r["tool_check"]["valid"]
            ),
            sessions=self.params.sessions,
            stop_reasons=reasons,
            jsonl_path=str(self.jsonl_path),
        )
