"""Why a start failed, as the engine's own lines say it: read from DGX Spark (GB10) server
logs in public repositories (``tests/fixtures/real/vllm``)."""

from __future__ import annotations

from collector.vllm.log_parser import parse_vllm_log
from tests.support.real_corpus import vllm_logs


def _lines(stem: str) -> list[str]:
    [log] = [log for log in vllm_logs() if log.path.stem == stem]
    return log.lines


def test_a_traceback_logged_as_a_warning_fails_nothing() -> None:
    # jethac/dgx-spark-hijinks: vLLM logs at WARNING that deep_gemm "was found but failed to
    # import", with the ImportError's traceback, and goes on to capture and serve.
    lines = _lines("v0.22-spark-hijinks-gemma4-31b-deep-gemm-warning-traceback-started")
    [plan] = parse_vllm_log(lines)
    assert (plan.outcome, plan.error) == ("started", None)
