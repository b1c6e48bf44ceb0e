"""A quiet-while-starting hang signal (the shared-memory line, Ray's GetTimeoutError) seen
before the capture showed any start is held until the capture says what the server was doing:
dropped where the first start opens in the middle of starting (the workers were still
compiling, loading or capturing), a hang signal with its own line and time otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collector.inspect import inspect_vllm_log
from collector.vllm.log_facts import VllmFact
from collector.vllm.log_parser import HOLD_LINES, HOLD_S, VllmLogParser

# noonghunna/club-3090#138 (a comment's log, these lines verbatim and in its order): the
# engine's shared-memory line, then a worker still compiling.
SHM = (
    "(EngineCore pid=151) INFO 05-20 20:35:51 [shm_broadcast.py:681] No available shared memory "
    "broadcast block found in 60 seconds. This typically happens when some processes are "
    "hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization)."
)
CACHE_DIR = (
    "(Worker_TP0 pid=160) INFO 05-20 20:36:19 [backends.py:1089] Using cache directory: "
    "~/.cache/vllm/torch_compile_cache/a946163132/rank_0_0/backbone for vLLM's torch.compile"
)
COMPILING = (
    "(Worker_TP0 pid=160) INFO 05-20 20:36:19 [backends.py:1148] Dynamo bytecode transform "
    "time: 88.00 s"
)
# A start's first line (myoceane.fr's vLLM 0.19 log).
ARGS = (
    "(APIServer pid=6539) INFO 04-18 20:22:57 [utils.py:233] non-default args: {'model_tag': "
    "'openai/gpt-oss-20b', 'port': 10000, 'model': 'openai/gpt-oss-20b', 'trust_remote_code': "
    "True, 'max_model_len': 131072, 'gpu_memory_utilization': 0.65}"
)
# ray-project/ray#47183's exception line.
GET = "ray.exceptions.GetTimeoutError: Get timed out: some object(s) not ready."
# An engine RPC timeout (a corpus fixture's line): a hang in every phase.
RPC = "ERROR 09-06 04:14:11 [core.py:640] TimeoutError: RPC call to execute_model timed out."
# The corpus's glm53-193 lines: the engine's stats, a /metrics scrape.
STATS = (
    "2026-09-14T08:19:31.697350293Z (APIServer pid=1) INFO 09-14 08:19:31 [loggers.py:310] "
    "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 18.1 tokens/s, "
    "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 12.8%, Prefix cache hit rate: 49.5%, "
    "MM cache hit rate: 0.0%"
)
SCRAPE = '(APIServer pid=851) INFO:     10.109.20.86:59146 - "GET /metrics HTTP/1.1" 200 OK'
# Chatter that says nothing of a start (AI-Hypercomputer/maxtext#3574's TPU log, Gloo's line).
GLOO = "[Gloo] Rank 0 is connected to 0 peer ranks. Expected number of connected peer ranks is : 0"


def _feed(
    lines: list[str], parser: VllmLogParser | None = None, t0: float = 1000.0
) -> tuple[VllmLogParser, list[VllmFact]]:
    parser = parser or VllmLogParser()
    facts = [f for i, line in enumerate(lines) for f in parser.feed(line, t0 + i, ref=100 + i)]
    return parser, [f for f in facts if f.kind == "hang_signal"]


def _where(fact: VllmFact) -> tuple[Any, ...]:
    return (fact.data["signal"], fact.data["phase"], fact.line_no, fact.ts, fact.ref)


def test_a_signal_before_a_start_opening_mid_start_is_dropped() -> None:
    parser, signals = _feed([SHM, CACHE_DIR, COMPILING])
    assert signals == [] and parser.finish() == []
    assert parser.current is not None and parser.current.phase == "profiling"
    # Ray's ray.get timing out before a start seen at its weights' load line (vllm#6768's,
    # 0.5): the same.
    load = "INFO 07-24 03:57:31 model_runner.py:266] Loading model weights took 13.4966 GB"
    parser, signals = _feed([GET, load])
    assert signals == [] and parser.finish() == []


def test_a_signal_before_a_fresh_start_is_released_with_its_own_line() -> None:
    parser, signals = _feed([SHM, CACHE_DIR, ARGS, COMPILING])
    assert [_where(f) for f in signals] == [("shm_broadcast_timeout", None, 1, 1000.0, 100)]
    assert signals[0].data["line"] == SHM
    assert parser.finish() == []


def test_a_signal_before_serving_or_a_failure_is_released() -> None:
    for opener in (STATS, "INFO:     Application startup complete."):
        _parser, signals = _feed([SHM, opener])
        assert [_where(f) for f in signals] == [("shm_broadcast_timeout", None, 1, 1000.0, 100)]
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."  # constructed
    _parser, signals = _feed([GET, oom])
    assert [_where(f) for f in signals] == [("ray_timeout", None, 1, 1000.0, 100)]


def test_a_signal_no_start_follows_is_released_when_the_input_ends() -> None:
    parser, signals = _feed([SHM, CACHE_DIR, SHM])
    assert signals == []
    released = parser.finish()
    assert [_where(f) for f in released] == [
        ("shm_broadcast_timeout", None, 1, 1000.0, 100),
        ("shm_broadcast_timeout", None, 3, 1002.0, 102),
    ]
    assert parser.finish() == []


def test_a_signal_no_start_follows_is_released_after_lines_or_log_time() -> None:
    chatter = GLOO
    _parser, signals = _feed([SHM] + [chatter] * (HOLD_LINES - 1))
    assert signals == []
    _parser, signals = _feed([SHM] + [chatter] * HOLD_LINES)
    assert [_where(f) for f in signals] == [("shm_broadcast_timeout", None, 1, 1000.0, 100)]
    parser = VllmLogParser()
    parser.feed(SHM, 1000.0, ref=7)
    assert [f for f in parser.feed(chatter, 1000.0 + HOLD_S - 1) if f.kind == "hang_signal"] == []
    [late] = [f for f in parser.feed(chatter, 1000.0 + HOLD_S) if f.kind == "hang_signal"]
    assert _where(late) == ("shm_broadcast_timeout", None, 1, 1000.0, 7)


def test_a_scrape_answered_says_the_server_was_serving_and_releases_the_signal() -> None:
    # Only a server whose start is complete answers /metrics: the held line was a hang's.
    parser, signals = _feed([SHM, SCRAPE])
    assert [_where(f) for f in signals] == [("shm_broadcast_timeout", None, 1, 1000.0, 100)]
    assert parser.current is not None and parser.current.outcome == "started"


def test_a_signal_no_phase_quiets_releases_the_held_ones_first() -> None:
    _parser, signals = _feed([SHM, RPC])
    assert [f.data["signal"] for f in signals] == ["shm_broadcast_timeout", "rpc_timeout"]
    assert [f.line_no for f in signals] == [1, 2]


def test_a_held_signal_survives_the_parsers_snapshot() -> None:
    parser, _ = _feed([SHM])
    restored = VllmLogParser.restore(parser.snapshot())
    _, signals = _feed([ARGS], restored)
    assert [_where(f) for f in signals] == [("shm_broadcast_timeout", None, 1, 1000.0, 100)]
    parser, _ = _feed([SHM])
    _, signals = _feed([COMPILING], VllmLogParser.restore(parser.snapshot()))
    assert signals == []


def test_inspect_reports_a_released_signal_at_its_own_line(tmp_path: Path) -> None:
    log = tmp_path / "held.log"
    log.write_text("\n".join(["# a header line", SHM, CACHE_DIR, ARGS]) + "\n")
    [signal] = inspect_vllm_log(log)["hang_signals"]
    assert (signal["line_no"], signal["start"], signal["phase"]) == (2, None, None)
    log.write_text("\n".join([SHM, CACHE_DIR]) + "\n")
    [signal] = inspect_vllm_log(log)["hang_signals"]
    assert (signal["line_no"], signal["start"]) == (1, None)
    log.write_text("\n".join([SHM, COMPILING]) + "\n")
    assert inspect_vllm_log(log)["hang_signals"] == []
