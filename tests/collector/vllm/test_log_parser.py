"""vLLM log understanding against real-format logs from several vLLM versions."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.vllm.log_lines import split_vllm_line
from collector.vllm.log_parser import VllmLogParser, parse_vllm_log
from collector.vllm.plan import PLAN_FIELDS
from tests.support.real_corpus import vllm_logs
from tests.support.timing import fastest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm"
REAL = FIXTURES.parent / "real" / "vllm"


def _plans(name: str):
    return parse_vllm_log((FIXTURES / name).read_text().splitlines())


def test_gb10_mtp_start_0_20_2() -> None:
    [plan] = _plans("v0.20.2_mtp_gb10.log")
    assert plan.vllm_version == "0.20.2"
    assert (plan.model_load_gib, plan.model_load_s) == (23.43, 146.682945)
    assert plan.drafter_loaded is True
    assert plan.cuda_graph_estimate_gib == -0.9
    assert plan.anomalies == ["negative CUDA graph memory estimate: -0.9 GiB"]
    assert (plan.kv_cache_gib, plan.kv_cache_tokens) == (66.58, 5_747_892)
    assert (plan.max_concurrency, plan.max_concurrency_tokens) == (21.93, 262_144)
    assert plan.cuda_graph_pool_actual_gib is None  # vLLM omits it for a negative estimate
    assert (plan.outcome, plan.error) == ("started", None)
    assert [(p["phase"], p["line_no"]) for p in plan.phases] == [
        ("starting", 1),
        ("loading_weights", 4),
        ("loading_drafter", 6),
        ("profiling", 9),
        ("capturing_cuda_graphs", 14),
        ("serving", 16),
    ]
    assert plan.phases[2]["log_time"] == "05-14 08:23:05"


def test_0_11_colours_two_line_kv_and_shutdown() -> None:
    [plan] = _plans("v0.11.0_colour_plain.log")
    assert plan.vllm_version == "0.11.0"
    assert plan.model_load_gib == 15.2683
    assert plan.drafter_loaded is False
    assert plan.cuda_graph_estimate_gib is None
    assert (plan.kv_cache_tokens, plan.max_concurrency, plan.max_concurrency_tokens) == (
        592_480,
        18.08,
        32_768,
    )
    assert plan.outcome == "started"
    assert [p["phase"] for p in plan.phases][-2:] == ["serving", "stopped"]


def test_0_29_one_line_kv_and_pool() -> None:
    [plan] = _plans("v0.29.0_pool.log")
    assert (plan.kv_cache_tokens, plan.max_concurrency, plan.max_concurrency_tokens) == (
        1_253_392,
        9.56,
        131_072,
    )
    assert (plan.cuda_graph_pool_actual_gib, plan.cuda_graph_pool_estimated_gib) == (0.58, 0.62)
    assert plan.anomalies == []


def test_failed_start_then_restart_0_33() -> None:
    failed, started = _plans("v0.33.0_restart_fail_then_start.log")
    assert failed.outcome == "failed"
    assert failed.error is not None
    assert "on startup is less than desired GPU memory utilization" in failed.error
    assert [p["phase"] for p in failed.phases] == ["starting", "loading_weights", "failed"]
    assert started.outcome == "started" and started.error is None
    assert started.kv_cache_tokens == 5_292_160  # "GPU + host KV cache size"
    assert started.max_concurrency == 20.19
    assert started.phases[0]["line_no"] == 10


def test_incomplete_start_during_drafter_load() -> None:
    [plan] = _plans("v0.15.0_incomplete.log")
    assert (plan.outcome, plan.phase, plan.drafter_loaded) == (
        "incomplete",
        "loading_drafter",
        True,
    )
    assert plan.model_load_gib is None


def test_to_dict_keys_exact() -> None:
    [plan] = _plans("v0.29.0_pool.log")
    assert tuple(plan.to_dict()) == PLAN_FIELDS


def test_live_feed_facts_stats_and_spec() -> None:
    parser = VllmLogParser()
    facts = []
    for n, line in enumerate((FIXTURES / "v0.20.2_mtp_gb10.log").read_text().splitlines()):
        facts += parser.feed(line, ts=1000.0 + n)
    phases = [f.data["phase"] for f in facts if f.kind == "phase"]
    assert phases[:3] == ["starting", "loading_weights", "loading_drafter"]
    drafter = next(f for f in facts if f.kind == "phase" and f.data["phase"] == "loading_drafter")
    assert (drafter.ts, drafter.line_no) == (1005.0, 6)
    assert [f.data for f in facts if f.kind == "anomaly"] == [
        {"anomaly": "negative CUDA graph memory estimate: -0.9 GiB"}
    ]
    stats = [f.data for f in facts if f.kind == "stats"]
    assert stats[0] == {
        "engine": "000",
        "prompt_throughput": 4012.3,
        "generation_throughput": 41.2,
        "running": 1,
        "waiting": 0,
        "swapped": None,
        "deferred": None,
        "preemptions": None,
        "kv_cache_usage_pct": 3.9,
        "cpu_kv_cache_usage_pct": None,
        "prefix_cache_hit_rate_pct": 12.5,
        "cpu_prefix_cache_hit_rate_pct": None,
        "external_prefix_cache_hit_rate_pct": None,
        "mm_cache_hit_rate_pct": None,
    }
    assert stats[1]["generation_throughput"] == 0.0
    [spec] = [f.data for f in facts if f.kind == "spec_decode"]
    assert spec == {
        "mean_acceptance_length": 2.44,
        "current_speculative_depth": None,
        "accepted_throughput": 24.3,
        "drafted_throughput": 33.67,
        "accepted_tokens": 243,
        "drafted_tokens": 336,
        "acceptance_rate_pct": 72.2,
        "per_position_acceptance": [0.81, 0.633],
    }
    assert parser.current is not None and parser.current.outcome == "started"


def test_v0_stats_line_without_engine_prefix() -> None:
    # V0 (and V1 before 0.8.4) print no "Engine NNN: "; V0 counts swapped requests and CPU KV.
    line = (
        "INFO 01-22 18:27:20 metrics.py:449] Avg prompt throughput: 0.0 tokens/s, Avg generation "
        "throughput: 41.7 tokens/s, Running: 1 reqs, Swapped: 2 reqs, Pending: 3 reqs, GPU KV "
        "cache usage: 2.0%, CPU KV cache usage: 0.5%."
    )
    [fact] = [f for f in VllmLogParser().feed(line) if f.kind == "stats"]
    assert fact.data["engine"] is None
    assert (fact.data["running"], fact.data["swapped"], fact.data["waiting"]) == (1, 2, 3)
    assert (fact.data["kv_cache_usage_pct"], fact.data["cpu_kv_cache_usage_pct"]) == (2.0, 0.5)


def test_stats_line_external_prefix_and_mm_cache_hit_rates() -> None:
    line = (
        "(APIServer pid=1) INFO 07-20 18:11:49 [loggers.py:271] Engine 002: Avg prompt throughput: "
        "0.1 tokens/s, Avg generation throughput: 43.3 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 10.1%, Prefix cache hit rate: 5.0%, MM cache hit rate: 7.5%, "
        "External prefix cache hit rate: 100.0%"
    )
    [fact] = [f for f in VllmLogParser().feed(line) if f.kind == "stats"]
    assert fact.data["engine"] == "002"
    assert fact.data["prefix_cache_hit_rate_pct"] == 5.0
    assert fact.data["mm_cache_hit_rate_pct"] == 7.5
    assert fact.data["external_prefix_cache_hit_rate_pct"] == 100.0


@pytest.mark.parametrize(
    ("line", "rate", "accepted", "drafted"),
    [
        # V0's line: the rate is a fraction.
        (
            "INFO 10-16 19:05:47 metrics.py:367] Speculative metrics: Draft acceptance rate: "
            "0.642, System efficiency: 0.598, Number of speculative tokens: 3, Number of accepted "
            "tokens: 8547, Number of draft tokens: 13311, Number of emitted tokens: 10616.",
            64.2,
            8547,
            13311,
        ),
        # V1 0.8.4-0.10: the rate first, in percent, with no "Avg".
        (
            "INFO 06-06 14:20:34 [metrics.py:86] SpecDecoding metrics: Draft acceptance rate: "
            "38.8%, Mean acceptance length: 2.16, Accepted: 150 tokens, Drafted: 387 tokens, "
            "Per-position acceptance rate: 0.543, 0.357, 0.264",
            38.8,
            150,
            387,
        ),
        # V1 0.8.3: nothing drafted yet.
        (
            "INFO 04-02 18:03:41 [metrics.py:53] SpecDecoding metrics: Draft acceptance rate: "
            "nan%, Accepted: 0 tokens, Drafted: 0 tokens",
            None,
            0,
            0,
        ),
    ],
)
def test_older_spec_decode_lines(
    line: str, rate: float | None, accepted: int, drafted: int
) -> None:
    [fact] = [f for f in VllmLogParser().feed(line) if f.kind == "spec_decode"]
    assert fact.data["acceptance_rate_pct"] == rate
    assert (fact.data["accepted_tokens"], fact.data["drafted_tokens"]) == (accepted, drafted)


@pytest.mark.parametrize(
    "line",
    [
        "INFO 05-14 08:27:01 [loggers.py:257] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 12.0 tokens/s, Running: 2 reqs, Waiting: 1 reqs, "
        "Deferred: 0 reqs, Preemptions: 3, GPU KV cache usage: 50.5%",
        "(APIServer pid=1) INFO 05-14 08:27:01 [loggers.py:257] Engine 000: Avg prompt "
        "throughput: 0.0 tokens/s, Avg generation throughput: 12.0 tokens/s, Running: 2 reqs, "
        "Waiting: 1 reqs, GPU KV cache usage: 50.5%, Prefix cache hit rate: 0.0%",
    ],
)
def test_stats_line_variants(line: str) -> None:
    [fact] = [f for f in VllmLogParser().feed(line) if f.kind == "stats"]
    assert (fact.data["running"], fact.data["waiting"], fact.data["kv_cache_usage_pct"]) == (
        2,
        1,
        50.5,
    )


def test_max_model_len_warning_is_not_a_failure() -> None:
    parser = VllmLogParser()
    parser.feed("(APIServer pid=1) INFO 05-14 08:20:40 [utils.py:233] non-default args: {}")
    parser.feed(
        "(APIServer pid=1) WARNING 05-14 08:20:41 [model.py:1700] User-specified max_model_len "
        "(300000) is greater than the derived max_model_len (max_position_embeddings=262144)."
    )
    [plan] = parser.plans()
    assert (plan.outcome, plan.error) == ("incomplete", None)


def _feed(lines: list[str]) -> tuple[VllmLogParser, list]:
    parser = VllmLogParser()
    facts = [fact for n, line in enumerate(lines) for fact in parser.feed(line, ts=float(n))]
    return parser, facts + parser.finish()  # the input ends: held signals are released


def test_tensor_parallel_ranks_that_disagree_plan_with_the_smallest() -> None:
    # Constructed in vLLM 0.11's format (the real corpus's TP logs have equal ranks).
    tag = "(Worker_TP{r} pid=7{r}) INFO 10-22 09:33:49 [gpu_worker.py:298] "
    parser, _ = _feed(
        [
            "(APIServer pid=1) INFO 10-22 09:30:00 [utils.py:233] non-default args: {}",
            tag.format(r=0) + "Available KV cache memory: 11.17 GiB",
            tag.format(r=1) + "Available KV cache memory: 9.50 GiB",
        ]
    )
    assert parser.current is not None and parser.current.kv_cache_gib == 9.5


def test_a_hang_signal_while_serving_then_the_engine_dies() -> None:
    # Constructed from the real lines in tests/fixtures/real/vllm (v0.11 format).
    parser, facts = _feed(
        [
            "(APIServer pid=1) INFO 10-22 09:30:00 [utils.py:233] non-default args: {}",
            "(APIServer pid=1) INFO:     Application startup complete.",
            "(EngineCore_DP0 pid=2) INFO 10-22 09:43:49 [shm_broadcast.py:466] No available "
            "shared memory broadcast block found in 60 seconds. This typically happens when "
            "some processes are hanging or doing some time-consuming work (e.g. compilation).",
            "(EngineCore_DP0 pid=2) ERROR 10-22 09:53:49 [core.py:710] EngineCore encountered a "
            "fatal error.",
        ]
    )
    [signal] = [f.data for f in facts if f.kind == "hang_signal"]
    assert (signal["signal"], signal["phase"]) == ("shm_broadcast_timeout", "serving")
    [plan] = parser.plans()
    assert (plan.outcome, plan.phase) == ("crashed", "crashed")
    assert plan.error is not None and "EngineCore encountered a fatal error." in plan.error


def test_a_capture_that_starts_at_a_stats_line_is_serving() -> None:
    # vLLM 0.23's lines (vllm-project/vllm#48752): only a running engine logs its stats, so a
    # capture that opens on them (and the hang after) belongs to a server that is serving.
    parser, facts = _feed(
        [
            "(APIServer pid=605) INFO 07-15 15:32:57 [loggers.py:273] Engine 000: Avg prompt "
            "throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 3 reqs, "
            "Waiting: 0 reqs, GPU KV cache usage: 0.7%, Prefix cache hit rate: 0.0%",
            "(EngineCore pid=1154) INFO 07-15 15:33:47 [shm_broadcast.py:705] No available shared "
            "memory broadcast block found in 60 seconds.",
        ]
    )
    [plan] = parser.plans()
    assert (plan.outcome, plan.phase, plan.error) == ("started", "serving", None)
    assert [f.kind for f in facts][:2] == ["server_start", "phase"]
    [stats] = [f for f in facts if f.kind == "stats"]
    assert stats.data["running"] == 3 and stats.plan_index == 0
    [signal] = [f.data for f in facts if f.kind == "hang_signal"]
    assert signal["phase"] == "serving"


def test_a_capture_that_starts_at_the_kernel_warmup_is_a_start_warming_up() -> None:
    # eugr/spark-vllm-docker#367 (four GB10s, TP4): the warmup (kernel_warmup.py, FlashInfer's
    # autotuner) runs after the KV cache is sized and before the capture, so only a start
    # logs it; the shared-memory wait after it is the workers still warming up, no hang.
    parser, facts = _feed(
        [
            "> (Worker_TP0 pid=511) INFO 09-02 11:57:03 [kernel_warmup.py:260] Using FlashInfer "
            "autotune cache file: /root/.cache/vllm/flashinfer_autotune_cache/0.6.17/121a/7685fa"
            "72c3785a3e884b5d3b2bb87ccbb468cd302c7613d7cb8db94ece3747ff/autotune_configs.json",
            "(Worker_TP0 pid=511) 2026-09-02 11:57:03,500 - INFO - autotuner.py:829 - "
            "flashinfer.jit: [Autotuner]: Autotuning process starts ...",
            "(EngineCore pid=397) INFO 09-02 11:57:54 [shm_broadcast.py:801] No available shared "
            "memory broadcast block found in 60 seconds. This typically happens when some "
            "processes are hanging or doing some time-consuming work (e.g. compilation, "
            "weight/kv cache quantization).",
        ]
    )
    [plan] = parser.plans()
    assert (plan.outcome, plan.phase, plan.error) == ("incomplete", "profiling", None)
    assert not [f for f in facts if f.kind == "hang_signal"]


@pytest.mark.parametrize(
    "line",
    [
        # FlashInfer's autotuner (vllm#49011's line): vLLM tunes it only to warm up
        "(EngineCore pid=7476) 2026-07-25 13:42:38,525 - INFO - autotuner.py:824 - "
        "flashinfer.jit: [Autotuner]: Autotuning process starts ...",
        # club3090#104's: the warmup says so with the autotune disabled too
        "(Worker_TP1 pid=100) INFO 05-07 20:28:11 [kernel_warmup.py:44] Skipping FlashInfer "
        "autotune because it is disabled.",
    ],
)
def test_a_warmup_line_alone_opens_a_start_in_its_profile(line: str) -> None:
    [plan] = parse_vllm_log([line])
    assert (plan.outcome, plan.phase) == ("incomplete", "profiling")


def _signals(lines: list[str]) -> list[tuple[str, str | None]]:
    _, facts = _feed(lines)
    return [(f.data["signal"], f.data["phase"]) for f in facts if f.kind == "hang_signal"]


def test_the_shared_memory_line_in_its_0_5_and_0_6_wordings() -> None:
    # 0.5.1-0.6.4 warned "No available block found in 60 second." (vllm#10661); the reader's
    # debug copy in 0.6-0.8 lacked a space (vllm/distributed/device_communicators/shm_broadcast.py).
    signals = _signals(
        [
            "(VllmWorkerProcess pid=1634044) WARNING 11-26 13:07:36 shm_broadcast.py:391] No "
            "available block found in 60 second. ",
            "DEBUG 07-04 17:35:10 [shm_broadcast.py:456] No available shared memory broadcast "
            "block foundin 60 second.",
        ]
    )
    assert signals == [("shm_broadcast_timeout", None)] * 2


def test_the_nccl_watchdog_timing_out_a_collective_is_one_signal_per_rank() -> None:
    # torch's lines in a vLLM TP server (vllm#5458): the "terminated with exception" line
    # restates the timeout, the "Timeout at NCCL work" line details it.
    signals = _signals(
        [
            "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for 600086 milliseconds before timing out.",
            "[rank0]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 0] Timeout at NCCL work: 1, last "
            "enqueued NCCL work: 1, last completed NCCL work: 0.",
            "[rank0]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 0] Process group watchdog thread "
            "terminated with exception: [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran "
            "for 600086 milliseconds before timing out.",
            "(RayWorkerWrapper pid=4009) [rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog "
            "caught collective operation timeout: WorkNCCL(SeqNum=158046, OpType=GATHER, "
            "NumelIn=2867200, NumelOut=0, Timeout(ms)=600000) ran for 600027 milliseconds before "
            "timing out.",
        ]
    )
    assert signals == [("nccl_watchdog_timeout", None)] * 2


def test_a_ray_executor_timeout_is_a_hang_signal() -> None:
    # The Ray executor's RPC timeout: the compiled graph's channel read (ray#53845, ray#59249)
    # or ray.get timing out; the traceback's source lines and an import name no timeout.
    # ray#53845's line is cut short after its ObjectID's first hex digits; the last two lines
    # (a traceback's source line, an import) are constructed.
    assert (
        _signals(
            [
                "ERROR 06-16 10:59:13 [core.py:505] ray.exceptions.RayChannelTimeoutError: System "
                "error: Timed out waiting for object available to read. ObjectID: 00cc3164",
                "(EngineCore_DP0 pid=579) ERROR 12-05 22:43:45 [core.py:845] ray.exceptions."
                "RayChannelTimeoutError: System error: Timed out waiting for object available "
                "to read.",
                "ray.exceptions.GetTimeoutError: Get timed out: some object(s) not ready.",
                "ERROR 06-16 10:59:13 [core.py:505]     except RayChannelTimeoutError as e:",
                "from ray.exceptions import GetTimeoutError",
            ]
        )
        == [("ray_timeout", None)] * 3
    )


def test_rays_get_timeout_while_the_start_is_under_way_is_no_hang() -> None:
    # Constructed from real lines: vllm#6768's (0.5) load line, ray#53845's channel timeout and
    # ray#47183's exception line (Ray Data's actor pool timing out its ray.get on actors whose
    # vLLM was still loading its weights; vllm#9694 the same with TP > 1). vLLM's own ray.get
    # timeout while starting is its placement-group wait (0.4-0.5: ray.get(pg.ready(),
    # timeout=1800)): a slow or stuck start, which its outcome tells, not a hung engine (like
    # the shared-memory line). The compiled graph's channel is read only for the engine's
    # steps: its timeout stays a hang signal in any phase.
    load = "INFO 07-24 03:57:31 model_runner.py:266] Loading model weights took 13.4966 GB"
    get = "ray.exceptions.GetTimeoutError: Get timed out: some object(s) not ready."
    channel = (
        "ERROR 06-16 10:59:13 [core.py:505] ray.exceptions.RayChannelTimeoutError: System "
        "error: Timed out waiting for object available to read. ObjectID: "
        "00cc316456d39201286bda103a37bbae72e42e380100000004e1f505"
    )
    assert _signals([load, get]) == []
    assert _signals([load, channel]) == [("ray_timeout", "loading_weights")]
    assert _signals([get]) == [("ray_timeout", None)]


def test_the_nccl_watchdog_stuck_in_a_cuda_call() -> None:
    # torch 2.3's heartbeat monitor (vllm#9839); the "Heartbeat monitor timed out!" line before
    # it is the same event.
    assert _signals(
        [
            "[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 2 Rank 0] Heartbeat monitor timed out! "
            "Process will be terminated after dumping debug info. workMetaList_.size()=9",
            "[rank0]:[F ProcessGroupNCCL.cpp:1169] [PG 2 Rank 0] [PG 2 Rank 0] ProcessGroupNCCL's "
            "watchdog got stuck for 600 seconds without making progress in monitoring enqueued "
            "collectives.",
        ]
    ) == [("nccl_watchdog_stuck", None)]


SHM = (
    "(EngineCore_DP0 pid=2) INFO 10-22 09:{m} [shm_broadcast.py:466] No available shared memory "
    "broadcast block found in 60 seconds. This typically happens when some processes are hanging "
    "or doing some time-consuming work (e.g. compilation)."
)


def test_the_shared_memory_line_is_quiet_while_a_start_compiles_and_after_a_stop() -> None:
    # Constructed from vLLM 0.11's lines: workers compiling for minutes during the profile run
    # (vllm-ascend#3800), then serving, then a normal shutdown.
    signals = _signals(
        [
            "(APIServer pid=1) INFO 10-22 09:30:00 [utils.py:233] non-default args: {}",
            "(Worker_TP0 pid=3) INFO 10-22 09:31:00 [default_loader.py:267] Loading weights took "
            "30.20 seconds",
            SHM.format(m="32:18"),
            "(Worker_TP0 pid=3) INFO 10-22 09:33:48 [monitor.py:34] torch.compile takes 139.60 s "
            "in total",
            "(Worker_TP0 pid=3) INFO 10-22 09:33:49 [gpu_worker.py:298] Available KV cache "
            "memory: 11.17 GiB",
            SHM.format(m="34:49"),
            "(APIServer pid=1) INFO:     Application startup complete.",
            SHM.format(m="43:49"),
            "(APIServer pid=1) INFO:     Shutting down",
            SHM.format(m="44:49"),
        ]
    )
    assert signals == [("shm_broadcast_timeout", "serving")]


def test_a_capture_from_the_compile_total_of_later_releases_is_a_start_profiling() -> None:
    # noonghunna/club-3090#487: the capture begins at the compile total in its later wording
    # ("took", not "takes"); the shared-memory line after it is the warmup's, no hang.
    parser, facts = _feed(
        [
            "(Worker_TP0 pid=95) INFO 06-26 22:45:50 [monitor.py:53] torch.compile took 10.20 s "
            "in total",
            SHM.format(m="46:38"),
        ]
    )
    assert [plan.phase for plan in parser.plans()] == ["profiling"]
    assert not [f for f in facts if f.kind == "hang_signal"]


def test_an_nccl_timeout_while_a_start_profiles_is_still_a_hang() -> None:
    # A collective that never completes is a hang in any phase, unlike the shared-memory line.
    signals = _signals(
        [
            "(APIServer pid=1) INFO 10-22 09:30:00 [utils.py:233] non-default args: {}",
            "(Worker_TP0 pid=3) INFO 10-22 09:33:49 [gpu_worker.py:298] Available KV cache "
            "memory: 11.17 GiB",
            "[rank2]:[E1001 16:06:04.537131842 ProcessGroupNCCL.cpp:607] [Rank 2] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=128, "
            "NumelOut=128, Timeout(ms)=600000) ran for 600009 milliseconds before timing out.",
        ]
    )
    assert signals == [("nccl_watchdog_timeout", "profiling")]


def test_the_scheduler_dump_at_a_fatal_error_is_a_crash_whose_error_follows() -> None:
    # eugr/spark-vllm-docker#255: vLLM dumps the scheduler state when model execution raises,
    # before "EngineCore encountered a fatal error"; a capture of the dump alone is a crash.
    dump = (
        "(EngineCore pid=721) ERROR 05-19 18:16:22 [dump_input.py:79] Dumping scheduler output "
        "for model execution: SchedulerOutput(scheduled_new_reqs=[], scheduled_cac"
    )
    fatal = (
        "(EngineCore pid=721) ERROR 05-19 18:16:22 [core.py:1132] EngineCore encountered a "
        "fatal error."
    )
    [alone] = _feed([dump])[0].plans()
    assert (alone.outcome, alone.error) == ("crashed", None)
    [then] = _feed([dump, fatal])[0].plans()
    assert then.outcome == "crashed"
    assert (then.error or "").endswith("EngineCore encountered a fatal error.")


def test_v0_capturing_cudagraphs_for_decoding_is_the_capture_phase() -> None:
    # vllm-project/vllm#11251 (0.6.4.post1) and #15598 (0.8.x V0): V0's later wording.
    parser, _ = _feed(
        [
            "INFO 12-20 20:25:46 distributed_gpu_executor.py:57] # GPU blocks: 3852, # CPU "
            "blocks: 4096",
            "(VllmWorkerProcess pid=90) INFO 12-20 20:25:49 model_runner.py:1413] Capturing "
            "cudagraphs for decoding. This may lead to unexpected consequences if the model is "
            "not static.",
        ]
    )
    [plan] = parser.plans()
    assert [p["phase"] for p in plan.phases] == ["profiling", "capturing_cuda_graphs"]


def test_stats_do_not_revive_a_failed_start() -> None:
    parser, _ = _feed(
        [
            "(EngineCore pid=2) ERROR 06-23 06:27:21 [core.py:1229] EngineCore failed to start.",
            "(APIServer pid=1) INFO 06-23 06:27:31 [loggers.py:273] Engine 000: Avg prompt "
            "throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs",
        ]
    )
    [plan] = parser.plans()
    assert plan.outcome == "failed"


@pytest.mark.parametrize(
    ("line", "method", "tokens"),
    [
        # 0.10+: the API server's non-default args (spark-vllm-docker#296, vLLM 0.23)
        (
            "(APIServer pid=536) INFO 06-20 19:17:46 [api_utils.py:273] non-default args: "
            "{'model_tag': 'Qwen/Qwen3.6-35B-A3B-FP8', 'speculative_config': {'method': "
            "'dflash', 'model': 'z-lab/Qwen3.6-35B-A3B-DFlash', 'num_speculative_tokens': 5}}",
            "dflash",
            5,
        ),
        # the engine's config line: SpeculativeConfig's repr names the count num_spec_tokens
        (
            "(EngineCore_DP0 pid=7) INFO 10-22 09:30:05 [core.py:77] Initializing a V1 LLM "
            "engine (v0.11.0) with config: model='m', speculative_config=SpeculativeConfig("
            "method='mtp', model='m', num_spec_tokens=1), tokenizer='m'",
            "mtp",
            1,
        ),
    ],
)
def test_a_speculative_config_in_the_start_line_itself(line: str, method: str, tokens: int) -> None:
    parser = VllmLogParser()
    parser.feed(line)
    [plan] = parser.plans()
    assert plan.drafter_loaded is True
    assert (plan.speculative_method, plan.num_speculative_tokens) == (method, tokens)


def test_a_capture_that_opens_on_the_drafter_belongs_to_that_start() -> None:
    # vllm-project/vllm#46249 (0.2x, TP 4, MTP): the ranks detect the MTP drafter before the
    # checkpoint's progress bar; both are the one start.
    parser, _ = _feed(
        [
            "(Worker_TP3 pid=563381) INFO 06-21 23:53:10 [llm_base_proposer.py:1377] Detected "
            "MTP model. Sharing target model embedding weights with the draft model.",
            "Loading safetensors checkpoint shards:   0% Completed | 0/15 [00:00<?, ?it/s]",
        ]
    )
    [plan] = parser.plans()
    assert plan.drafter_loaded is True and plan.first_line_no == 1
    assert [p["phase"] for p in plan.phases] == ["loading_weights"]


# A traceback pasted without vLLM's header line ("EngineCore failed to start." or
# "EngineCore encountered a fatal error."): its frames say which of the two it was.
_E = "(EngineCore_DP0 pid=7) ERROR 02-03 22:43:35 [core.py:968] "
_STARTUP_TB = [
    _E + "Traceback (most recent call last):",
    _E + '  File "/x/vllm/v1/engine/core.py", line 699, in run_engine_core',
    _E + "    engine_core = EngineCoreProc(*args, **kwargs)",
    _E + '  File "/x/vllm/v1/engine/core.py", line 124, in __init__',
    _E + "    kv_cache_config = self._initialize_kv_caches(vllm_config)",
    _E + '  File "/x/vllm/v1/core/kv_cache_utils.py", line 1096, in unify_kv_cache_spec_page_size',
    _E + "    assert new_spec.page_size_bytes == max_page_size",
    _E + "AssertionError",
]
_BUSY_TB = [
    _E + '    raise TimeoutError("RPC call to sample_tokens timed out.")',
    _E + "TimeoutError: RPC call to sample_tokens timed out.",
    _E,
    _E + "The above exception was the direct cause of the following exception:",
    _E,
    _E + "Traceback (most recent call last):",
    _E + '  File "/x/vllm/v1/engine/core.py", line 959, in run_engine_core',
    _E + "    engine_core.run_busy_loop()",
    _E + '  File "/x/vllm/v1/engine/core.py", line 986, in run_busy_loop',
    _E + "    self._process_engine_step()",
]


def test_a_headless_api_server_traceback_through_run_server_failed_its_start() -> None:
    # The API server exiting through run_server with no line that it served: a failed start,
    # whose error is the exception (here a port already bound); the next banner opens another.
    tb = [
        '  File "/x/vllm/entrypoints/openai/api_server.py", line 530, in run_server',
        '    temp_socket.bind(("", args.port))',
        "OSError: [Errno 98] Address already in use",
        "INFO 10-10 10:23:00 api_server.py:526] vLLM API server version 0.6.1",
    ]
    first, second = parse_vllm_log(tb)
    assert (first.outcome, first.error) == ("failed", "OSError: [Errno 98] Address already in use")
    assert (second.outcome, second.vllm_version) == ("incomplete", "0.6.1")
    # Its root cause came earlier, in the engine's own traceback: that is the error.
    cause = "RuntimeError: Currently, block scaled fp8 gemm is not implemented for Blackwell"
    tb = ['  File "/x/vllm/_custom_ops.py", line 727, in cutlass_scaled_mm', cause]
    tb += ["Traceback (most recent call last):", '  File "/x/api_server.py", line 1, in <module>']
    [plan] = parse_vllm_log([*tb, "    uvloop.run(run_server(args))"])
    assert (plan.outcome, plan.error) == ("failed", cause)


@pytest.mark.parametrize(
    "line",
    [
        "(EngineCore_DP0 pid=504) ValueError: Current node has no GPU available. resource={}",
        "(EngineCore_DP0 pid=9) RuntimeError: No CUDA GPUs are available",
    ],
)
def test_no_gpu_for_the_engine_is_a_root_cause_even_alone(line: str) -> None:
    tb = ["(APIServer pid=1) Traceback (most recent call last):"]
    tb += ['(APIServer pid=1)   File "/x/vllm/entrypoints/cli/main.py", line 73, in main']
    [plan] = parse_vllm_log([line, *tb])
    assert (plan.outcome, plan.error) == ("failed", line)


def test_a_headless_startup_traceback_is_a_failed_start_with_its_last_line() -> None:
    [plan] = parse_vllm_log(_STARTUP_TB)
    assert (plan.outcome, plan.error) == ("failed", _E + "AssertionError")
    assert plan.phases[-1]["phase"] == "failed"


def test_a_headless_busy_loop_traceback_is_a_crash_with_the_exception_seen() -> None:
    [plan] = parse_vllm_log(_BUSY_TB)
    assert plan.outcome == "crashed"
    assert plan.error == _E + "TimeoutError: RPC call to sample_tokens timed out."


def test_after_a_headless_crash_a_logged_traceback_opens_no_extra_start() -> None:
    logged = [
        "(APIServer pid=1) INFO 02-03 22:50:00 [api_server.py:1] vLLM API server version 0.15.1",
        _E + "EngineCore failed to start.",
        *_STARTUP_TB,
    ]
    first, second = parse_vllm_log(_BUSY_TB + logged)
    assert first.outcome == "crashed"
    # The exception ending the failure line's traceback is why it failed.
    assert (second.outcome, second.error) == ("failed", _STARTUP_TB[-1])


def test_a_headless_traceback_survives_a_restore_before_its_frames() -> None:
    parser = VllmLogParser()
    for line in _BUSY_TB[:6]:
        parser.feed(line)
    parser = VllmLogParser.restore(parser.snapshot())
    for line in _BUSY_TB[6:]:
        parser.feed(line)
    [plan] = parser.plans()
    assert (plan.outcome, plan.error) == ("crashed", _BUSY_TB[1])


@pytest.mark.parametrize(
    ("lines", "error"),
    [
        # vllm-project/vllm#19186 (0.9): a worker's capture_end fails in the driver's wording.
        (
            [
                "(VllmWorker rank=3 pid=1090) ERROR 06-05 06:18:13 [multiproc_executor.py:470]"
                "     super().capture_end()",
                "(VllmWorker rank=3 pid=1090) ERROR 06-05 06:18:13 [multiproc_executor.py:470]"
                " RuntimeError: CUDA error: out of memory",
            ],
            "RuntimeError: CUDA error: out of memory",
        ),
        # gpustack/gpustack#835 (V0 0.6): NCCL fails while the workers build their groups.
        (
            [
                "(VllmWorkerProcess pid=1253) ERROR 12-25 01:10:28 multiproc_worker_utils.py:229]"
                " RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for"
                " details)",
                "ERROR 12-25 01:10:28 engine.py:366] Traceback (most recent call last):",
                'ERROR 12-25 01:10:28 engine.py:366]   File "/x/vllm/engine/multiprocessing/'
                'engine.py", line 119, in from_engine_args',
            ],
            "RuntimeError: NCCL error: unhandled system error",
        ),
    ],
)
def test_cuda_driver_oom_and_nccl_errors_are_root_causes(lines: list[str], error: str) -> None:
    [plan] = parse_vllm_log(lines)
    assert plan.outcome == "failed"
    assert plan.error is not None and error in plan.error


def test_a_multiproc_worker_dying_is_the_crash_and_its_error() -> None:
    # intel/llm-scaler#154 (compose prefix) and OpenPipe/ART#201: the executor names the dead
    # worker before the engine's generic fatal error; a capture may hold only that line.
    prefix = "eap-llm-server-on-arc  | ERROR 11-08 11:01:29 [multiproc_executor.py:135] "
    died = prefix + "Worker proc VllmWorker-3 died unexpectedly, shutting down executor."
    fatal = prefix.replace("multiproc_executor.py:135", "core.py:502")
    [plan] = parse_vllm_log([died, fatal + "EngineCore encountered a fatal error."])
    assert (plan.outcome, plan.error) == ("crashed", died.split("| ", 1)[1])  # compose's peeled
    # Constructed: the "(exit code: N)" wording vllm-project/vllm-ascend#7742 quotes, in
    # vLLM's own header.
    [plan] = parse_vllm_log(
        [
            "ERROR 08-22 13:05:18 [multiproc_executor.py:295] Worker proc VllmWorker-14 died "
            "unexpectedly (exit code: None), shutting down executor."
        ]
    )
    assert plan.outcome == "crashed"


def test_a_capture_that_starts_at_the_init_total_opens_a_start() -> None:
    # vllm-project/vllm#29830 (0.12, DEBUG on): the capture begins at the engine's DEBUG memory
    # summary (not a failure), then the init total: one start, still incomplete.
    [plan] = parse_vllm_log(
        [
            "(EngineCore_DP0 pid=3413554) DEBUG 12-01 19:49:03 [v1/worker/gpu_worker.py:484] Free "
            "memory on device (43.91/44.4 GiB) on startup. Desired GPU memory utilization is "
            "(0.9, 39.96 GiB).",
            "(EngineCore_DP0 pid=3413554) INFO 12-01 19:49:03 [v1/engine/core.py:254] init engine "
            "(profile, create kv cache, warmup model) took 1.34 seconds",
        ]
    )
    assert (plan.outcome, plan.error, plan.init_engine_s) == ("incomplete", None, 1.34)


def test_a_capture_that_starts_at_a_spec_decode_line_is_serving() -> None:
    # Like the stats line, only a running engine logs its spec-decode metrics (vllm#9539).
    parser = VllmLogParser()
    facts = parser.feed(
        "INFO 10-16 19:05:47 metrics.py:367] Speculative metrics: Draft acceptance rate: 0.642, "
        "System efficiency: 0.598, Number of speculative tokens: 3, Number of accepted tokens: "
        "8547, Number of draft tokens: 13311, Number of emitted tokens: 10616."
    )
    assert [f.kind for f in facts][-1] == "spec_decode"
    assert parser.current is not None and parser.current.outcome == "started"


@pytest.mark.parametrize(
    ("line", "error"),
    [
        # vllm-project/vllm#21882: the reporter quoting the issue as a markdown block quote.
        (
            "> RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {'EngineCore_0': 1}",
            "RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {'EngineCore_0': 1}",
        ),
        # vllm-project/vllm#33297: quoted Buildkite lines, caret-notation colours in the second.
        (
            "> [2026-01-26T17:25:37Z] ^[[0;36m(EngineCore_DP0 pid=738)^[[0;0m ^[[31mERROR^[[0m "
            "^[[90m01-26 09:25:37^[[0m ^[[90m[core.py:935]^[[0m ValueError: Free memory on device "
            "cuda:0 (1.54/22.05 GiB) on startup is less than desired GPU memory utilization "
            "(0.9, 19.84 GiB).",
            "(EngineCore_DP0 pid=738) ERROR 01-26 09:25:37 [core.py:935] ValueError: Free memory "
            "on device cuda:0 (1.54/22.05 GiB) on startup is less than desired GPU memory "
            "utilization (0.9, 19.84 GiB).",
        ),
        # eugr/spark-vllm-docker#396: a rendered block quote copied with its bar ("▎ ").
        (
            "▎ ValueError: To serve at least one request with the model's max seq len (196608),",
            "ValueError: To serve at least one request with the model's max seq len (196608),",
        ),
        # Constructed from vllm#48214's `docker logs --timestamps` stamp, nested in a quote.
        (
            "> 2026-07-08T22:40:03.166647879Z \x1b[0;36m(EngineCore pid=542)\x1b[0;0m ERROR "
            "07-08 22:40:03 [core.py:1136] EngineCore failed to start.",
            "(EngineCore pid=542) ERROR 07-08 22:40:03 [core.py:1136] EngineCore failed to start.",
        ),
        # Constructed: the journal's prefix as ProxmoxVED#2047 and 1Cat-vLLM#237 show it (the
        # real logs in tests/fixtures/real/vllm) before a tagged and an untagged failure line.
        (
            "Aug 19 18:34:30 vllm vllm[8707]: (EngineCore pid=542) ERROR 07-08 22:40:03 "
            "[core.py:1136] EngineCore failed to start.",
            "(EngineCore pid=542) ERROR 07-08 22:40:03 [core.py:1136] EngineCore failed to start.",
        ),
        (
            "авг 18 14:15:04 llm python3[28059]: ERROR 08-18 14:15:04 [core.py:718] "
            "EngineCore failed to start.",
            "ERROR 08-18 14:15:04 [core.py:718] EngineCore failed to start.",
        ),
    ],
)
def test_a_pastes_wrappers_are_not_part_of_the_error(line: str, error: str) -> None:
    [plan] = parse_vllm_log([line])
    assert (plan.outcome, plan.error) == ("failed", error)


@pytest.mark.parametrize("mark", ["▎", "> "])
def test_a_long_run_of_quote_marks_is_peeled_in_linear_time(mark: str) -> None:
    # Constructed: a line of nothing but a quote's marks. Each is peeled where the last one
    # ended, not by cutting a copy of the rest of the line each time (quadratic: a 100 kB
    # line of bars took over 50 times a plain line's time; linear, 5 to 13 times here, the
    # marks being peeled one by one). Against a line as long without them (no wall-clock
    # limit: the machine is shared).
    def cost(text: str) -> float:
        return fastest(lambda: split_vllm_line(text + " RuntimeError: x"))

    run = (mark * 100_000)[:100_000]
    assert cost(run) < 25 * cost("x" * len(run))


def test_the_journals_prefix_is_peeled_from_lines_vllm_did_not_tag() -> None:
    # Constructed: vllm#8177's NCCL watchdog excerpt (tests/fixtures/real/vllm), untagged as
    # PyTorch prints it, behind the journal's prefixes as ProxmoxVED#2047 (short) and AEON-7's
    # GB10 issue #16 (short-iso, host redacted) show them. Its lines are vLLM's process's
    # own, so its error reads the same as from the bare log.
    path = REAL / "v0.6-vllm-8177-nccl-watchdog-illegal-memory-access.log"
    lines = [line for line in path.read_text().splitlines() if not line.startswith("# ")]
    [bare] = parse_vllm_log(lines)
    for prefix in (
        "Aug 19 18:34:30 vllm vllm[8707]: ",
        "2026-06-21T12:23:33-07:00 [REDACTED_HOST] docker[3764470]: ",
    ):
        [plan] = parse_vllm_log([prefix + line for line in lines])
        assert (plan.outcome, plan.error) == (bare.outcome, bare.error)
        assert plan.error is not None and plan.error.startswith("[rank0]:[E")


def test_wrapped_traceback_frames_keep_their_indent() -> None:
    # allenai/olmocr#260 (a Python logger re-logging vLLM's output) and vllm#16652 (compose,
    # padded): once the wrapper is peeled, the frames say where the start failed.
    olmocr = (
        '2025-06-27 12:57:51,690 - __main__ - INFO -   File "/home/ml/.conda/envs/olmocr/lib/'
        'python3.11/site-packages/vllm/v1/utils.py", line 494, in wait_for_engine_startup'
    )
    compose = (
        'vllm_server  |   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/'
        'async_llm.py", line 136, in from_vllm_config' + " " * 20
    )
    quoted = ['>   File "/x/vllm/v1/engine/core.py", line 1, in run_busy_loop', "> KeyError: 3"]
    for lines, outcome, error in (
        ([olmocr], "failed", None),
        ([compose], "failed", None),
        (quoted, "crashed", "KeyError: 3"),
    ):
        [plan] = parse_vllm_log(lines)
        assert (plan.outcome, plan.error) == (outcome, error)


def test_spec_decode_line_with_the_current_speculative_depth() -> None:
    # The wording vLLM's own test asserts ("Current speculative depth: 2" after the mean
    # acceptance length, tests/v1/metrics); the line is a real DFlash run's, quoted in a public
    # write-up the code index holds without naming its repository, so it is no corpus file.
    parser = VllmLogParser()
    facts = parser.feed(
        "(APIServer pid=1) INFO 09-04 11:01:16 [metrics.py:125] SpecDecoding metrics: Mean "
        "acceptance length: 6.82, Current speculative depth: 7, Accepted throughput: 6.46 "
        "tokens/s, Drafted throughput: 7.77 tokens/s, Accepted: 256 tokens, Drafted: 308 tokens, "
        "Per-position acceptance rate: 1.000, 1.000, 1.000, 1.000, 0.795, 0.614, 0.409, Avg "
        "Draft acceptance rate: 83.1%"
    )
    [spec] = [f.data for f in facts if f.kind == "spec_decode"]
    assert (spec["current_speculative_depth"], spec["mean_acceptance_length"]) == (7, 6.82)
    assert (spec["accepted_tokens"], spec["acceptance_rate_pct"]) == (256, 83.1)
    assert facts_without_depth()["current_speculative_depth"] is None


def facts_without_depth() -> dict[str, object]:
    """A 0.10-era line, before the depth was printed (vllm#24127)."""
    parser = VllmLogParser()
    facts = parser.feed(
        "INFO 09-08 10:14:14 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 5.44, "
        "Accepted throughput: 4.37 tokens/s, Drafted throughput: 4.92 tokens/s, Accepted: 262 "
        "tokens, Drafted: 295 tokens, Per-position acceptance rate: 0.983, Avg Draft acceptance "
        "rate: 88.8%"
    )
    return next(f.data for f in facts if f.kind == "spec_decode")


def test_a_capture_that_opens_on_compile_lines_is_a_start_still_profiling() -> None:
    # vLLM 0.2x's lines (noonghunna/club-3090#178): V1 compiles inside its profile run.
    parser, facts = _feed(
        [
            "(Worker_TP0 pid=111) INFO 05-21 06:31:48 [backends.py:1148] Dynamo bytecode "
            "transform time: 5.34 s",
            "(EngineCore pid=102) INFO 05-21 06:32:41 [shm_broadcast.py:698] No available shared "
            "memory broadcast block found in 60 seconds.",
        ]
    )
    [plan] = parser.plans()
    assert (plan.phase, plan.outcome) == ("profiling", "incomplete")
    assert not [f for f in facts if f.kind == "hang_signal"]


_SERVING = [
    "INFO 09-08 09:02:40 [api_server.py:1] vLLM API server version 0.11.0",
    "INFO:     Application startup complete.",
]


def _one(lines: list[str]):
    [plan] = parse_vllm_log(lines)
    return plan.outcome, plan.error


@pytest.mark.parametrize(
    "fault",
    [
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
        "RuntimeError: CUDA error: unspecified launch failure",
        "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx(...)`",
        "RuntimeError: Triton Error [CUDA]: an illegal instruction was encountered",
    ],
)
def test_a_cuda_fault_fails_a_start_over_the_generic_line(fault: str) -> None:
    tag = "(EngineCore_DP0 pid=7) ERROR 09-08 09:02:44 [core.py:718] "
    lines = [
        _SERVING[0],
        f"{tag}EngineCore failed to start.",
        f"{tag}Traceback (most recent call last):",
        f'{tag}  File "/x/vllm/v1/engine/core.py", line 1, in run_engine_core',
        f"{tag}{fault}",
    ]
    assert _one(lines) == ("failed", lines[-1])


def test_a_cuda_fault_crashes_a_serving_engine_over_engine_dead() -> None:
    dead = (
        "(APIServer pid=1) ERROR 09-08 10:00:00 [async_llm.py:1] vllm.v1.engine.exceptions."
        "EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root "
        "cause."
    )
    fault = (
        "(EngineCore pid=9) ERROR 09-08 10:00:00 [core.py:1] "
        "torch.AcceleratorError: CUDA error: device-side assert triggered"
    )
    hint = (
        "(EngineCore pid=9) ERROR 09-08 10:00:00 [core.py:1] "
        "Search for `cudaErrorAssert' in https://docs.nvidia.com/cuda/ for more information."
    )
    assert _one([*_SERVING, dead, fault, hint]) == ("crashed", fault)
    assert _one([*_SERVING, fault, dead]) == ("crashed", fault)


def test_a_cuda_warning_is_no_fault() -> None:
    warning = "WARNING 09-08 10:00:00 [x.py:1] CUDA error: misaligned address seen, retrying"
    assert _one([*_SERVING, warning]) == ("started", None)


def test_a_cuda_error_after_a_clean_stop_is_no_crash() -> None:
    # At interpreter exit the CUDA runtime is unloaded before some destructors run: their
    # "CUDA error: driver shutting down" (cudaErrorCudartUnloading) follows every clean stop.
    stop = [
        "INFO:     Shutting down",
        "INFO:     Application shutdown complete.",
        "INFO:     Finished server process [1]",
    ]
    teardown = [
        "Exception ignored in: <function CustomAllreduce.__del__ at 0x7f2a>",
        "Traceback (most recent call last):",
        '  File "/x/vllm/custom_all_reduce.py", line 1, in __del__',
        "RuntimeError: CUDA error: driver shutting down",
    ]
    [plan] = parse_vllm_log([*_SERVING, *stop, *teardown])
    assert (plan.outcome, plan.phase, plan.error) == ("started", "stopped", None)
    # Nor is any other failure or worker exit teardown prints: the stop was clean.
    exits = [
        "ERROR 09-08 09:10:02 [core.py:1] EngineCore hit an exception: shutting down",
        "ERROR 09-08 09:10:02 [multiproc_executor.py:1] Worker proc VllmWorker-0 died "
        "unexpectedly, shutting down executor.",
    ]
    [plan] = parse_vllm_log([*_SERVING, *stop, *exits])
    assert (plan.outcome, plan.phase, plan.error) == ("started", "stopped", None)


def test_a_bare_tracebacks_cuda_fault_then_a_crash_line_is_a_crash() -> None:
    lines = [
        "ERROR 07-27 23:31:27 [core.py:591]     raise RuntimeError(",
        "ERROR 07-27 23:31:27 [core.py:591] RuntimeError: CUDA error: misaligned address",
    ]
    assert _one(lines) == ("failed", lines[-1])  # a guess: nothing says it was serving
    crash = "ERROR 07-27 23:31:27 [async_llm.py:428] AsyncLLM output_handler failed."
    assert _one([*lines, crash]) == ("crashed", lines[-1])


def test_a_worker_cuda_fault_then_the_scheduler_dump_is_a_crash() -> None:
    # A worker's traceback, then the engine's dump of the scheduler output it was executing
    # (pastes often end there): the dump says the engine was serving, so the fault crashed it.
    fault = (
        "(VllmWorker TP0 pid=600) ERROR 10-20 03:20:50 [multiproc_executor.py:671] "
        "RuntimeError: CUDA error: an illegal memory access was encountered"
    )
    dump = (
        "(EngineCore_DP0 pid=559) ERROR 10-20 03:20:50 [dump_input.py:76] Dumping scheduler "
        "output for model execution: SchedulerOutput(scheduled_new_reqs=[])"
    )
    assert _one([fault]) == ("failed", fault)  # a guess: nothing says it was serving
    assert _one([fault, dump]) == ("crashed", fault)


def test_interleaved_fatal_tracebacks_keep_each_engines_exception() -> None:
    def line(dp: int, text: str) -> str:
        return f"(EngineCore_DP{dp} pid={100 + dp}) ERROR 06-11 11:46:39 [core.py:517] {text}"

    lines = [
        *_SERVING,
        line(0, "EngineCore encountered a fatal error."),
        line(0, "Traceback (most recent call last):"),
        line(1, "EngineCore encountered a fatal error."),
        line(1, "Traceback (most recent call last):"),
        line(1, "ValueError: the second engine's"),
        line(0, '  File "/x/vllm/v1/engine/core.py", line 876, in run_busy_loop'),
        line(0, "AttributeError: the first engine's"),
    ]
    assert _one(lines) == ("crashed", lines[-1])
    parser = VllmLogParser()
    for text in lines[:-1]:
        parser.feed(text)
    restored = VllmLogParser.restore(parser.snapshot())  # the open traceback survives a restart
    restored.feed(lines[-1])
    assert restored.current is not None and restored.current.error == lines[-1]


def test_serving_config_from_args_and_the_engine_line() -> None:
    """V0's Namespace args, then the engine's resolved config line (dtype, max_seq_len) and
    V1's non-default args dict: the plan keeps what a configuration matrix varies."""
    [v0] = parse_vllm_log(
        [
            "INFO 05-11 08:17:48 api_server.py:149] vLLM API server version 0.4.2",
            "INFO 05-11 08:17:48 api_server.py:150] args: Namespace(host='0.0.0.0', "
            "dtype='auto', kv_cache_dtype='fp8', max_model_len=2048, pipeline_parallel_size=2, "
            "tensor_parallel_size=4, gpu_memory_utilization=0.94, quantization=None, "
            "enforce_eager=True)",
            "INFO 05-11 08:17:49 llm_engine.py:161] Initializing an LLM engine (v0.4.2) with "
            "config: model='m', speculative_config=None, dtype=torch.float16, max_seq_len=2048, "
            "tensor_parallel_size=4, pipeline_parallel_size=2, quantization=awq, "
            "quantization_param_path=None, enforce_eager=True, kv_cache_dtype=fp8,",
        ]
    )
    assert (v0.tensor_parallel_size, v0.pipeline_parallel_size, v0.max_model_len) == (4, 2, 2048)
    assert (v0.dtype, v0.quantization, v0.kv_cache_dtype) == ("float16", "awq", "fp8")
    assert (v0.gpu_memory_utilization, v0.enforce_eager) == (0.94, True)
    [v1] = parse_vllm_log(
        [
            "(APIServer pid=1) INFO 06-20 19:17:46 [api_utils.py:273] non-default args: "
            "{'model_tag': 'Q', 'dtype': 'bfloat16', 'max_model_len': 262144, "
            "'data_parallel_size': 2, 'gpu_memory_utilization': 0.5, 'kv_cache_dtype': 'auto'}",
            "(APIServer pid=1) INFO 06-20 19:17:47 [model.py:1543] Using max model len 131072",
        ]
    )
    assert (v1.dtype, v1.data_parallel_size, v1.gpu_memory_utilization) == ("bfloat16", 2, 0.5)
    assert v1.max_model_len == 131072  # the resolved length, after the args
    assert v1.tensor_parallel_size is None  # the args do not say
    # kv_cache_dtype's "auto" is a setting of its own (a dtype's is the engine line's to resolve).
    assert v1.kv_cache_dtype == "auto"


def test_the_attention_backend_is_the_first_one_stated() -> None:
    """A forced --attention-backend is what vLLM then selects (it refuses to start otherwise);
    a later selection line (a drafter's) does not replace the target model's. Real lines:
    spark-vllm-docker#296's args (vLLM 0.23, 'flash_attn'), then vllm#31740's selection."""
    logs = {log.path.stem: log.lines for log in vllm_logs()}
    [args] = [x for x in logs["v0.23-spark-296-logo-dflash-args"] if "non-default args" in x]
    [chosen] = [x for x in logs["vllm-31740-gb10-gpt-oss-120b-loading"] if "TRITON_ATTN" in x]
    [plan] = parse_vllm_log([args, chosen])
    assert plan.attention_backend == "FLASH_ATTN"  # not TRITON_ATTN, as on its own


def test_a_drafters_backend_and_a_vision_encoders_are_not_the_servers() -> None:
    """jethac/dgx-spark-hijinks' DFlash start (vLLM 0.20.1): the args give the drafter its own
    backend inside the speculative config ('attention_backend': 'flash_attn'); the selector then
    names the target's by its enum ("Using AttentionBackendEnum.TRITON_ATTN backend."). Qwen3.8's
    vision encoder (sostrowsk/dgx-spark-local-llm) is named by the enum too, for itself only."""
    logs = {log.path.stem: log.lines for log in vllm_logs()}
    lines = logs["v0.20-spark-hijinks-gemma4-nvfp4-dflash-15-started"]
    [args] = [x for x in lines if "non-default args" in x]
    [target, drafter] = [x for x in lines if "Using AttentionBackendEnum." in x][1:3]
    [plan] = parse_vllm_log([args])
    assert (plan.attention_backend, plan.speculative_method) == (None, "dflash")
    assert plan.max_model_len == 262144 and plan.num_speculative_tokens == 15
    [plan] = parse_vllm_log([args, target, drafter])
    assert plan.attention_backend == "TRITON_ATTN"
    # Verbatim, sostrowsk/dgx-spark-local-llm's qwen38-nvfp4.log (vLLM 0.25.1), line 26.
    vit = (
        "(EngineCore pid=552076) INFO 08-21 09:46:24 [cuda.py:535] "
        "Using backend AttentionBackendEnum.FLASH_ATTN for vit attention"
    )
    [plan] = parse_vllm_log([args, vit, target])
    assert plan.attention_backend == "TRITON_ATTN"


def test_a_signal_stop_and_its_teardowns_engine_dead_error_are_no_crash() -> None:
    """sostrowsk/dgx-spark-local-llm's 0.25.1 server on a DGX Spark, stopped by a signal: the API
    server's handler logs "[shutdown] API server: shutdown triggered", aborts the engine, and the
    output handler's EngineDeadError follows before uvicorn's "Shutting down". The same lines
    without the trigger are a crash."""
    [log] = [x for x in vllm_logs() if "sigterm-teardown" in x.path.name]
    [plan] = parse_vllm_log(log.lines)
    assert (plan.outcome, plan.error) == ("started", None)
    assert [p["phase"] for p in plan.phases] == ["serving", "stopped"]
    untriggered = [x for x in log.lines if "shutdown triggered" not in x]
    [plan] = parse_vllm_log(untriggered)
    assert plan.outcome == "crashed"


def test_a_capture_opening_on_engine_hit_an_exception_is_a_guess_its_frames_settle() -> None:
    """vllm#14765 (V1, 0.8 development): the capture opens on "EngineCore hit an exception", which
    run_engine_core logged for a constructor or a busy loop that raised; the busy loop's frames
    say the engine was serving: crashed. That line is no root cause: the traceback's exception,
    when it comes, is the error."""
    [log] = [x for x in vllm_logs() if "14765" in x.path.name]
    [plan] = parse_vllm_log(log.lines)
    assert plan.outcome == "crashed" and plan.error is not None
    assert "EngineCore hit an exception" in plan.error
    # Constructed: the traceback's last line as the same header would print it.
    cause = "ERROR 03-13 11:26:04 [core.py:337] RuntimeError: CUDA error: an illegal memory access"
    [plan] = parse_vllm_log([*log.lines, cause + " was encountered"])
    assert plan.outcome == "crashed"
    assert plan.error == cause + " was encountered"


def test_a_worker_dying_while_the_engine_starts_fails_the_start() -> None:
    """The multiproc executor's monitor reports a worker's death during the engine's profile
    too: "EngineCore failed to start." after it says the start failed (1Cat-vLLM#539's lines,
    after the 0.13 start of Kelsidavis/rusteze's log up to its profiling); without that line
    nothing says the engine never served."""
    logs = {log.path.stem: log.lines for log in vllm_logs()}
    start = logs["v0.13-rusteze-inductor-autotune-oom-engine-failed"]
    start = start[: next(i for i, x in enumerate(start) if "Dynamo bytecode" in x) + 1]
    lines = logs["v0.2x-1cat-539-pp2-custom-allreduce-ima-failed"]
    [died] = [x for x in lines if "died unexpectedly" in x]
    [failed] = [x for x in lines if "EngineCore failed to start" in x]
    [plan] = parse_vllm_log([*start, died, failed])
    assert (plan.outcome, plan.error) == ("failed", died)
    [plan] = parse_vllm_log([*start, died])
    assert (plan.outcome, plan.error) == ("crashed", died)


def test_lines_a_terminal_wrapped_mid_word_read_whole() -> None:
    """dennislee22/vLLM-benchmarking's 0.10.1.1 log, copied from a terminal that hard-wrapped it:
    the args dict cut inside the model's name, a weights line cut after "Model loading " (the
    space at the cut lost to the line's end) or after "GiB ", the capture line after "in 11".
    Each part on its own reads nothing; the parts together read as vLLM wrote them."""
    logs = {log.path.stem: log.lines for log in vllm_logs()}
    lines = logs["v0.10-benchmarking-7b-ray-2-nodes-hard-wrapped"]

    [start] = [x for x in lines if "API server version" in x]

    def pair(cut: str) -> list[str]:
        i = next(i for i, x in enumerate(lines) if x.rstrip().endswith(cut))
        return [start, *lines[i : i + 2]]

    [plan] = parse_vllm_log(pair("'model': 'Qwen"))
    assert (plan.gpu_memory_utilization, plan.tensor_parallel_size) == (0.5, 2)
    [plan] = parse_vllm_log(pair("Model loading"))
    assert (plan.model_load_gib, plan.model_load_s) == (7.1217, 198.627679)
    [plan] = parse_vllm_log(pair("Model loading took 7.1217 GiB"))
    assert (plan.model_load_gib, plan.model_load_s) == (7.1217, 198.942282)
    [plan] = parse_vllm_log(pair("Graph capturing finished in 11"))
    assert (plan.cuda_graph_capture_s, plan.cuda_graph_capture_gib) == (11.0, 1.0)
    # A bare line that is a record of its own (the 120B log's load bar) continues nothing.
    bar = next(x for x in logs["v0.10-benchmarking-120b-ray-4-nodes-ansi-repeated"] if "0/15" in x)
    [plan] = parse_vllm_log([*pair("Model loading took 7.1217 GiB")[:2], bar])
    assert plan.model_load_gib is None


def test_a_backend_selected_before_the_capture_shows_its_start() -> None:
    """rl-swarm#92's V0 excerpt opens on the backend's selection line, then "Starting to load
    model": the start keeps it, across a restore in between. A start line (pytorch/serve#3343's
    engine line) or the server stopping (the 0.11 fixture's uvicorn line) in between says the
    selection was an earlier run's."""
    logs = {log.path.stem: log.lines for log in vllm_logs()}
    chosen, load = logs["v0.7-rlswarm-92-dash-prefixed"][1:3]
    [engine] = [x for x in logs["v0.6.1-torchserve-3343-engine-config"] if "with config" in x]
    [stopped] = [
        x
        for x in (FIXTURES / "v0.11.0_colour_plain.log").read_text().splitlines()
        if "Application shutdown complete" in x
    ]
    assert [p.attention_backend for p in parse_vllm_log([chosen, load])] == ["FLASH_ATTN"]
    assert [p.attention_backend for p in parse_vllm_log([chosen, engine, load])] == [None]
    assert [p.attention_backend for p in parse_vllm_log([chosen, stopped, load])] == [None]
    parser = VllmLogParser()
    parser.feed(chosen)
    parser = VllmLogParser.restore(parser.snapshot())
    parser.feed(load)
    assert parser.current is not None and parser.current.attention_backend == "FLASH_ATTN"


def test_a_wrapped_engine_config_line_goes_on_on_the_next_line_only() -> None:
    """pytorch/serve#3343's engine config line, wrapped by the paste: the next line (no header,
    the cut value's tail, then ", name=") states prefix caching, also across a restore. Not
    after a blank line or another line in between: that is no longer the same config."""
    logs = {log.path.stem: log.lines for log in vllm_logs()}
    engine, wrapped, load = logs["v0.6.1-torchserve-3343-engine-config"][:3]

    def caching(lines: list[str]) -> list[bool | None]:
        return [p.enable_prefix_caching for p in parse_vllm_log(lines)]

    assert caching([engine, wrapped, load]) == [False]
    assert caching([engine, "", wrapped]) == [None]
    assert caching([engine, load, wrapped]) == [None]
    parser = VllmLogParser()
    parser.feed(engine)
    parser = VllmLogParser.restore(parser.snapshot())
    parser.feed(wrapped)
    assert parser.current is not None and parser.current.enable_prefix_caching is False


def test_a_long_run_of_digits_parses_in_linear_time() -> None:
    # The stats header's "N Engines Aggregated" must not retry its digits from every digit of
    # a long number (a dumped tensor, a token-id blob): that was quadratic, minutes per line.
    # Against a line of the same length in the same run (no wall-clock limit: the machine is
    # shared): linear, the two cost alike; quadratic, the digits cost thousands of times more.
    def cost(char: str) -> float:
        lines = [*_SERVING, char * 10_000, "ERROR 09-08 10:00:00 [x.py:1] " + char * 10_000]
        return fastest(lambda: parse_vllm_log(lines))

    assert cost("7") < 50 * cost("x")


def test_a_worker_failing_to_start_fails_the_start() -> None:
    # vllm-project/vllm#26328 (0.11.0, DEBUG paths): the EAGLE3 drafter loads, then a worker's
    # constructor raises; no engine line says so before the process traceback.
    [plan] = parse_vllm_log(
        [
            "(Worker_TP1 pid=530) INFO 10-06 18:54:29 [v1/worker/gpu_model_runner.py:2641] "
            "Loading drafter model...",
            "(Worker_TP1 pid=530) ERROR 10-06 18:54:30 [v1/executor/multiproc_executor.py:597] "
            "WorkerProc failed to start.",
        ]
    )
    assert plan.drafter_loaded is True
    assert plan.outcome == "failed"
    assert plan.error is not None and plan.error.endswith("WorkerProc failed to start.")


def test_a_load_bar_flushed_after_the_failure_stays_in_the_failed_start() -> None:
    # vllm-project/vllm#31273 (0.13.0): the OOM while loading, then the bar at 1/37 that stderr
    # flushed after it; a new start's bar begins at 0/N.
    oom = (
        "(EngineCore_DP0 pid=556790) torch.OutOfMemoryError: CUDA out of memory. Tried to "
        "allocate 80.00 MiB. GPU 0 has a total capacity of 139.72 GiB of which 60.69 MiB is free."
    )
    bar = "Loading safetensors checkpoint shards:   3% Completed | 1/37 [00:02<01:39,  2.77s/it]"
    [plan] = parse_vllm_log([oom, bar])
    assert (plan.outcome, plan.error) == ("failed", oom)
    restart = "Loading safetensors checkpoint shards:   0% Completed | 0/37 [00:00<?, ?it/s]"
    assert len(parse_vllm_log([oom, bar, restart])) == 2


@pytest.mark.parametrize("tags", ["(" + "pid=1 " * 2_000, "(pid=1) " * 1_500 + "x "])
def test_process_tags_before_a_header_are_found_in_linear_time(tags: str) -> None:
    # The tags before a header are looked for back from it: a long unclosed "(... pid=N ..."
    # or many tags with text between them must not be retried from each "(" (quadratic).
    # Against a line as long without them (no wall-clock limit: the machine is shared).
    def cost(prefix: str) -> float:
        lines = [prefix + "ERROR 09-08 10:00:00 [x.py:1] CUDA error: out of memory"]
        return fastest(lambda: parse_vllm_log(lines))

    assert cost(tags) < 50 * cost("x" * len(tags))


@pytest.mark.parametrize(
    ("source", "exception"),
    [
        # vllm-project/vllm#6732 (0.5.3): pynccl's raise, then the NCCL error it raised
        (
            "(VllmWorkerProcess pid=760) ERROR 07-24 08:26:01 multiproc_worker_utils.py:226]"
            '     raise RuntimeError(f"NCCL error: {error_str}")',
            "(VllmWorkerProcess pid=760) ERROR 07-24 08:26:01 multiproc_worker_utils.py:226]"
            " RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for"
            " details)",
        ),
        # gpustack/gpustack#3379: the API server's raise, then its exception
        (
            '(APIServer pid=106)     raise RuntimeError("Engine core initialization failed. "',
            "(APIServer pid=106) RuntimeError: Engine core initialization failed. See root cause"
            " above. Failed core proc(s): {}",
        ),
    ],
)
def test_a_raise_statements_source_line_is_not_the_error(source: str, exception: str) -> None:
    # A traceback's source line quotes the message it is about to raise; the exception line
    # below it is the error (a source line that came first used to be kept as the root cause).
    [plan] = parse_vllm_log([source, exception])
    assert (plan.outcome, plan.error) == ("failed", exception)
    assert parse_vllm_log([source]) == []


@pytest.mark.parametrize(
    ("name", "outcome"),
    [
        # uvicorn's "INFO:     Application startup complete." (no vLLM header)
        ("vllm-21391-started-then-request-error", "started"),
        # the API server's bare "TimeoutError: Timed out waiting for engine core processes ..."
        ("v0.1x-vllm-35616-engine-ready-timeout", "failed"),
        # "  what():  ... CUDA error: unspecified launch failure", six spaces in
        ("lmcache-2581-watchdog-unspecified-launch-failure", "failed"),
    ],
)
def test_a_paste_indented_as_a_whole_keeps_its_outcome_lines(name: str, outcome: str) -> None:
    # vllm#6234 quotes its log indented by four spaces (v0.5-vllm-6234-tp4-workers); these real
    # logs indented so (the indent is ours): a line without vLLM's header then starts with four
    # spaces, but only Python code after them is a traceback's source line.
    logs = {log.path.stem: log.lines for log in vllm_logs()}
    lines = ["    " + line for line in logs[name]]
    assert [p.outcome for p in parse_vllm_log(lines)] == [outcome]
    assert [p.outcome for p in parse_vllm_log(logs[name])] == [outcome]


def test_a_cpp_exceptions_what_line_is_no_source_line() -> None:
    # The NCCL watchdog's "  what():  ..." is indented by two, not a traceback's source line.
    [plan] = parse_vllm_log(
        [
            "  what():  [PG ID 2 PG GUID 3 Rank 1] Process group watchdog thread terminated with"
            " exception: CUDA error: unspecified launch failure"
        ]
    )
    assert plan.error is not None and "CUDA error: unspecified launch failure" in plan.error


@pytest.mark.parametrize(
    ("name", "frames"),
    [
        # a worker's "WorkerProc hit an exception." through worker_busy_loop into the capture
        ("v0.1x-vllm-39788-workerproc-capture-no-header", 10),
        # the engine sizing its KV cache, the exception past the excerpt
        ("v0.11-vllm-27508-no-cache-memory-raise-source-lines", 10),
    ],
)
def test_a_bare_traceback_through_a_workers_startup_step_failed_its_start(
    name: str, frames: int
) -> None:
    logs = {log.path.stem: log.lines for log in vllm_logs()}
    [plan] = parse_vllm_log(logs[name][:frames])
    assert plan.outcome == "failed"


def test_a_worker_frame_named_like_a_startup_step_only_matches_it_whole() -> None:
    frame = '  File "/x/vllm/v1/worker/gpu_worker.py", line 9, in {}'
    lines = ["Traceback (most recent call last):", frame.format("load_model_weights_later")]
    assert parse_vllm_log(lines) == []
    assert [p.outcome for p in parse_vllm_log([lines[0], frame.format("load_model")])] == ["failed"]


def test_a_bare_traceback_through_a_v1_workers_execute_model_is_a_crash() -> None:
    # local-inference-lab/rtx6kpro#103: "WorkerProc hit an exception." and its traceback
    # through the worker's execute_model (an OOM on a long prefill): only the engine's steps
    # call it. V0's model runner's execute_model also ran its memory profile: no verdict.
    logs = {log.path.stem: log.lines for log in vllm_logs()}
    [plan] = parse_vllm_log(logs["v0.2x-rtx6kpro-103-workerproc-execute-model-no-header"])
    assert plan.outcome == "crashed"
    v0 = '  File "/x/vllm/worker/model_runner.py", line 1, in execute_model'
    assert parse_vllm_log(["Traceback (most recent call last):", v0]) == []


def test_a_long_run_of_worker_paths_parses_in_linear_time() -> None:
    # The running frame's V1 worker path must not be retried from each "/v1/worker/" of a
    # long line (no wall-clock limit: against a line as long without them).
    def cost(text: str) -> float:
        lines = ["Traceback (most recent call last):", "  " + text]
        return fastest(lambda: parse_vllm_log(lines))

    paths = "/v1/worker/" + "a/" * 30_000
    assert cost(paths) < 50 * cost("x" * len(paths))


def test_a_traceback_pasted_without_its_indent_still_has_frames() -> None:
    # ray-project/ray#59249 (0.1x V1, Ray executor): the engine's dying traceback with vLLM's
    # header before each line and no indent, no "Traceback" line: its frames read the compiled
    # graph's output (built on the engine's first step, read only for its steps), so the
    # engine died serving; the exception ending it is the error.
    logs = {log.path.stem: log.lines for log in vllm_logs()}
    lines = logs["v0.12-ray-59249-unindented-channel-timeout"]
    [plan] = parse_vllm_log(lines)
    assert plan.outcome == "crashed"
    assert plan.error == lines[-2]  # "... [core.py:845] ray.exceptions.RayChannelTimeoutError:"
    # The same frame indented, as Python prints it, reads the same.
    header = "(EngineCore_DP0 pid=579) ERROR 12-05 22:43:45 [core.py:845] "
    indented = [line.replace(header, header + "  ", 1) for line in lines[:1]] + lines[-2:]
    assert [(p.outcome, p.error) for p in parse_vllm_log(indented)] == [("crashed", lines[-2])]


def test_a_long_run_of_ray_paths_parses_in_linear_time() -> None:
    # The compiled graph's frame path must not be retried from each "/ray/dag/" of a long line.
    def cost(text: str) -> float:
        lines = ["Traceback (most recent call last):", "  " + text]
        return fastest(lambda: parse_vllm_log(lines))

    paths = "/ray/dag/" + "a" * 30_000 + '.py", line 1, in ' + "b" * 30_000 + " "
    assert cost(paths) < 50 * cost("x" * len(paths))


def test_a_failure_line_is_the_error_of_a_bare_tracebacks_start_until_its_exception() -> None:
    # huggingface/trl#3310 (0.8, eight data-parallel engines): EngineCore_7's frames through
    # executor_class(...) fail the start before any line says why; EngineCore_0's "hit an
    # exception" then is its error, until an exception line ends the traceback.
    logs = {log.path.stem: log.lines for log in vllm_logs()}
    lines = logs["v0.8-trl-3310-dp-engines-interleaved-hit-exception"]
    [plan] = parse_vllm_log(lines)
    assert plan.outcome == "failed"
    assert plan.error is not None and "EngineCore_0 pid=2095608) ERROR" in plan.error
    raised = "(EngineCore_7 pid=2095681) ERROR 04-17 23:05:06 [core.py:390] ValueError: bad"
    [plan] = parse_vllm_log([*lines, raised])
    assert plan.error == raised


def test_a_ray_worker_that_died_is_why_the_start_failed() -> None:
    # vllm-project/vllm#38529: the raylet reports the Ray worker died (a segfault), then the
    # engine's "EngineCore failed to start.": the worker's death is the error.
    logs = {log.path.stem: log.lines for log in vllm_logs()}
    died, failed = logs["v0.1x-vllm-38529-ray-raylet-worker-died-failed"][:2]
    [plan] = parse_vllm_log([died, failed])
    assert (plan.outcome, plan.error) == ("failed", died)
    # While serving it explains the crash line that follows, and crashes nothing alone.
    [plan] = parse_vllm_log([*_SERVING, died])
    assert (plan.outcome, plan.error) == ("started", None)
    dead = "(APIServer pid=1) ERROR 03-29 13:00:00 [async_llm.py:1] AsyncLLM output_handler failed."
    [plan] = parse_vllm_log([*_SERVING, dead, died])
    assert (plan.outcome, plan.error) == ("crashed", died)


_PROFILING = [
    "(EngineCore pid=4108) INFO 05-28 08:00:26 [gpu_worker.py:462] Available KV cache memory:"
    " 6.37 GiB",
]


def _frame(src: str) -> str:
    return (
        f"(EngineCore pid=4108) ERROR 05-28 08:00:36 [{src}]   File "
        '"/x/vllm/compilation/caching.py", line 217, in __call__'
    )


def test_the_engines_dying_traceback_without_its_header_fails_a_start_under_way() -> None:
    # LMCache/LMCache#3430: the plan, capture begins, then frames the engine's core.py logged
    # at ERROR (it does only when the engine dies); "EngineCore failed to start." is not in
    # the capture. The exception, when it follows, is the error.
    logs = {log.path.stem: log.lines for log in vllm_logs()}
    [plan] = parse_vllm_log(logs["v0.2x-lmcache-3430-plan-then-failed-at-capture"])
    assert (plan.outcome, plan.error) == ("failed", None)
    for src in ("core.py:1142", "v1/engine/core.py:718"):
        oom = "(EngineCore pid=4108) ERROR 05-28 08:00:36 [core.py:1142] RuntimeError: boom"
        assert _one([*_PROFILING, _frame(src), oom]) == ("failed", oom)
    # Constructed: the same frame pasted without its indent (ray#59249's paste lost it).
    unindented = _frame("core.py:1142").replace("]   File", "] File")
    assert _one([*_PROFILING, unindented]) == ("failed", None)


def test_other_error_frames_or_a_serving_engines_decide_nothing() -> None:
    # A traceback another module logged at ERROR (a model's inspection) may be survived; an
    # engine already serving reports its death with a header of its own.
    assert _one([*_PROFILING, _frame("registry.py:512")]) == ("incomplete", None)
    assert _one([*_SERVING, _frame("core.py:1142")]) == ("started", None)


def test_the_server_process_dying_uncaught_while_starting_fails_the_start() -> None:
    # MiaAI-Lab/DeepSeek-v4-Flash-One-DGX-Spark#13 (GB10): the KV-cache plan, then the API
    # server's own traceback up through vllm's CLI main, cut off before its exception.
    path = REAL / "v0.2x-miaai-dsv4-13-gb10-kv-plan-then-apiserver-traceback.log"
    lines = [line for line in path.read_text().splitlines() if not line.startswith("# ")]
    [plan] = parse_vllm_log(lines)
    assert (plan.outcome, plan.error, plan.kv_cache_tokens) == ("failed", None, 443242)
    # Constructed: the same frames after the server said it was up (uvicorn's real line)
    # decide nothing: a server that served and then dies is no failed start.
    served = [*lines[:2], "INFO:     Application startup complete.", *lines[3:]]
    [plan] = parse_vllm_log(served)
    assert plan.outcome == "started"


def test_args_whose_quotes_a_forum_made_typographic_still_state_the_configuration() -> None:
    # discuss.vllm.ai/t/2674 (vLLM 0.21.0): the forum turned the args' quotes into curly ones.
    [plan] = parse_vllm_log(
        [
            "(APIServer pid=17897) INFO 05-30 01:45:33 [utils.py:240] non-default args: "
            "{‘model_tag’: ‘nvidia/Gemma-4-31B-IT-NVFP4’, ‘model’: ‘nvidia/Gemma-4-31B-IT-NVFP4’, "
            "‘max_model_len’: 1024, ‘tensor_parallel_size’: 2, ‘gpu_memory_utilization’: 0.9, "
            "‘kv_cache_dtype’: ‘fp8’, ‘language_model_only’: True, ‘max_num_batched_tokens’: 1024, "
            "‘max_num_seqs’: 1}"
        ]
    )
    assert (plan.tensor_parallel_size, plan.max_model_len, plan.max_num_seqs) == (2, 1024, 1)
    assert (plan.gpu_memory_utilization, plan.kv_cache_dtype) == (0.9, "fp8")
    assert plan.max_num_batched_tokens == 1024
    # Constructed: a speculative config quoted the same way (“double” ones too).
    [spec] = parse_vllm_log(
        [
            "(APIServer pid=1) INFO 05-30 01:45:33 [utils.py:240] non-default args: "
            "{‘speculative_config’: {“method”: “mtp”, “num_speculative_tokens”: 3}}"
        ]
    )
    assert (spec.speculative_method, spec.num_speculative_tokens) == ("mtp", 3)


def test_a_bare_traceback_through_v0s_engine_loop_is_a_crash() -> None:
    # vllm#5060 (0.5.0): V0's "Engine background task failed" traceback, quoted without its
    # header: AsyncLLMEngine runs run_engine_loop and engine_step only once it serves.
    prefix = "> - 2024-06-22T20:16:34.700+00:00 ERROR 06-22 20:16:34 async_llm_engine.py:52] "
    lines = [
        prefix + '  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/'
        'async_llm_engine.py", line 532, in run_engine_loop',
        prefix + "    has_requests_in_progress = await asyncio.wait_for(",
    ]
    assert [p.outcome for p in parse_vllm_log(lines)] == ["crashed"]
    step = '  File "/x/vllm/engine/async_llm_engine.py", line 506, in engine_step'
    assert [p.outcome for p in parse_vllm_log([step])] == ["crashed"]


@pytest.mark.parametrize(
    "frame",
    [
        # Qwen3-VL#1204 (0.8.x V1): the model loader building the model
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/utils.py", '
        "line 286, in init_vllm_registered_model",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/model_loader/'
        'loader.py", line 133, in _initialize_model',
        # vllm#16343 (0.8.x V1): a model's __init__ building its layers
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/utils.py", '
        "line 610, in make_layers",
    ],
)
def test_a_bare_traceback_through_building_the_model_failed_its_start(frame: str) -> None:
    # The engine's error traceback cut before its exception and without its header: the
    # model is built only while a start loads it. Constructed: each real frame behind
    # Qwen3-VL#1204's header (vllm#16343's frame had its own, of the same form).
    line = "ERROR 05-13 21:09:41 [core.py:396] " + frame
    assert [p.outcome for p in parse_vllm_log([line])] == ["failed"]


def test_v0s_engine_iteration_timing_out_is_its_engine_dying() -> None:
    # vllm#5901 (0.5.x): V0 logs the timeout, marks its engine errored and re-raises: the
    # engine is dead (its "Engine background task failed" follows, when captured). The line
    # is a hang signal too, and the error: the timeout is why the background task failed.
    stats = (
        "INFO 08-29 02:12:22 metrics.py:406] Avg prompt throughput: 0.0 tokens/s, Avg generation "
        "throughput: 0.0 tokens/s, Running: 27 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV "
        "cache usage: 2.9%, CPU KV cache usage: 0.0%."
    )
    timeout = (
        "ERROR 08-29 02:12:22 async_llm_engine.py:658] Engine iteration timed out. "
        "This should never happen!"
    )
    parser = VllmLogParser()
    signals = [
        f.data["signal"]
        for line in (stats, timeout)
        for f in parser.feed(line)
        if f.kind == "hang_signal"
    ]
    assert signals == ["engine_iteration_timeout"]
    [plan] = parser.plans()
    assert (plan.outcome, plan.error) == ("crashed", timeout)


def test_a_forums_escaped_brackets_keep_the_header() -> None:
    # discuss.vllm.ai/t/2584: the forum's editor escaped each bracket of the pasted log.
    line = (
        "(EngineCore pid=258) INFO 04-24 10:21:03 \\[gpu_model_runner.py:4820\\] Model loading "
        "took 18.47 GiB memory and 10.990096 seconds"
    )
    parsed = split_vllm_line(line)
    assert (parsed.level, parsed.log_time, parsed.proc) == (
        "INFO",
        "04-24 10:21:03",
        "EngineCore pid=258",
    )
    assert parsed.msg.startswith("Model loading took 18.47 GiB")
    # Constructed in that form: the engine's dying traceback (logged by core.py) while the
    # start loads: a failed start.
    load = (
        "(EngineCore pid=258) INFO 04-24 10:21:03 \\[default_loader.py:384\\] Loading weights "
        "took 0.65 seconds"
    )
    [plan] = parse_vllm_log(
        [
            load,
            '(EngineCore pid=258) ERROR 04-24 10:22:30 \\[core.py:1142\\]   File "/x/vllm/v1/'
            'engine/core.py", line 1, in __init__',
        ]
    )
    assert plan.outcome == "failed"
