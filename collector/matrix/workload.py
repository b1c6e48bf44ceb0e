"""The seeded growing tool-call conversation workload.

``ToolConversation.run()`` drives ``sessions`` concurrent conversations (one thread each)
against an OpenAI-compatible ``/v1/chat/completions``, writes one JSONL record per request and
fsyncs it before that session's next request, and returns a ``WorkloadResult``. Cancel it from
any thread with the ``threading.Event`` it was given: in-flight requests are abandoned at once.
When the ``freeze`` event is set too (the host froze), those requests are recorded as cut by
the freeze (``cut_by_freeze``), not as errors, and the outcome is ``host_froze``.

With ``duration_s`` (a soak) each session runs conversation after conversation until the time
is up: one that reaches ``target_prompt_tokens`` or ``max_turns`` starts a fresh one.
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
from pathlib import Path
from typing import Any

import httpx

from collector.matrix.chat_request import Reply, post_chat
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

# Why a conversation ended and the next one (of a soak) may start.
FINISHED = ("target_prompt_tokens", "max_turns")
DURATION = "duration"


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
        freeze: threading.Event | None = None,
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
        self.freeze = freeze or threading.Event()
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
                reason = self._soak(client, session)
        except Exception as exc:  # one broken session must not take the others down
            reason = f"crashed: {exc!r}"
        self._stop_reasons[str(session)] = reason

    def _soak(self, client: httpx.Client, session: int) -> str:
        """One conversation, or (with ``duration_s``) fresh ones until the time is up."""
        duration = self.params.duration_s
        if duration is None:
            return self._converse(client, session, 0, None)
        deadline = self._monotonic() + duration
        conversation = 0
        while True:
            reason = self._converse(client, session, conversation, deadline)
            if reason not in FINISHED:
                return reason
            if self._monotonic() >= deadline:
                return DURATION
            conversation += 1

    def _converse(
        self, client: httpx.Client, session: int, conversation: int, deadline: float | None
    ) -> str:
        p = self.params
        # Conversation 0 keeps the seed of a single conversation: same seed, same requests.
        key = f"{p.seed}:{session}" + (f":{conversation}" if conversation else "")
        rng = random.Random(key)
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
        for turn in range(1, p.max_turns + 1):
            if deadline is not None and self._monotonic() >= deadline:
                return DURATION
            name, args = choose_call(rng)
            messages.append({"role": "user", "content": user_prompt(turn, name, args)})
            tool_retries = error_retries = 0
            attempt = 0
            while True:
                if self.cancel.is_set():
                    return "cancelled"
                attempt += 1
                reply, record = self._request(
                    client, (session, conversation, turn, attempt), messages
                )
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
        where: tuple[int, int, int, int],
        messages: list[dict[str, Any]],
    ) -> tuple[Reply, dict[str, Any]]:
        """One request; ``where`` is (session, conversation, turn, attempt)."""
        p = self.params
        session, conversation, turn, attempt = where
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
        reply = post_chat(
            client,
            body,
            timeout_s=p.request_timeout_s,
            cancel=self.cancel,
            monotonic=self._monotonic,
        )
        latency = self._monotonic() - t0
        choice = ((reply.body or {}).get("choices") or [{}])[0]
        usage = (reply.body or {}).get("usage") or {}
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        record: dict[str, Any] = {
            **self.tags,
            "workload": p.name,
            "session": session,
            "conversation": conversation,
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
            "cut_by_freeze": reply.cancelled and self.freeze.is_set(),
            "tool_check": None if reply.error or reply.cancelled else check_tool_calls(message),
            "request_bytes": len(body),
            "request_sha256": hashlib.sha256(body).hexdigest(),
        }
        self._write(record)
        return reply, {**record, "_message": message}

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
        if self.freeze.is_set():
            outcome = "host_froze"
        elif self.cancel.is_set() or "cancelled" in reasons.values():
            outcome = "cancelled"
        elif all(r in (*FINISHED, DURATION) for r in reasons.values()):
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
            cut_by_freeze=sum(1 for r in records if r["cut_by_freeze"]),
            conversations=len({(r["session"], r["conversation"]) for r in records}),
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
