"""The Prometheus text-format parser: labels with escapes, special values, comments."""

from __future__ import annotations

import math
from pathlib import Path

from agent import prom

FIXTURE = Path(__file__).parents[1] / "fixtures" / "vllm" / "metrics.txt"


def test_labels_with_escapes_and_timestamp() -> None:
    line = r'm_total{path="C:\\tmp",msg="say \"hi\"\nbye", empty=""} 3.5 1764400000000'
    assert prom.parse_line(line) == (
        "m_total",
        {"path": "C:\\tmp", "msg": 'say "hi"\nbye', "empty": ""},
        3.5,
    )


def test_special_values_comments_and_bare_names() -> None:
    text = '# HELP x help\n# TYPE x gauge\n\nx NaN\ny +Inf\nz -Inf\nw 1e3\nbroken{a="1"\n'
    samples = list(prom.parse(text))
    assert [s[0] for s in samples] == ["x", "y", "z", "w"]
    assert math.isnan(samples[0][2])
    assert samples[1][2] == math.inf and samples[2][2] == -math.inf and samples[3][2] == 1000.0


def test_totals_sum_label_sets_and_skip_nan() -> None:
    text = 'a{r="1"} 2\na{r="2"} 3\na{r="3"} NaN\na_created{r="1"} 99\nb 1\n'
    assert prom.totals(text, {"a", "c"}) == {"a": 5.0}


def test_a_vllm_shaped_exposition() -> None:
    text = FIXTURE.read_text()
    samples = list(prom.parse(text))
    assert len(samples) == 95  # every non-comment line of the fixture parses
    found = prom.totals(text, {"vllm:spec_decode_num_accepted_tokens_per_pos_total"})
    assert found == {"vllm:spec_decode_num_accepted_tokens_per_pos_total": 34719.0}


def test_openmetrics_eof_and_exemplars_are_read_past() -> None:
    # OpenMetrics ends with "# EOF" and may put an exemplar after the value ("# {...} v ts").
    text = (
        'vllm:generation_tokens_total{model_name="m"} 7.0 # {trace_id="0af7"} 1.0 1.7e9\n'
        'vllm:generation_tokens_created{model_name="m"} 1.7e9\n'
        "# EOF\n"
    )
    assert prom.totals(text, {"vllm:generation_tokens_total"}) == {
        "vllm:generation_tokens_total": 7.0
    }


def test_leading_blanks_before_a_sample_are_allowed() -> None:
    # The text format allows blanks before a token; a pasted or proxied exposition has them.
    text = '    vllm:num_requests_running{model_name="m"} 2.0\n\tvllm:num_requests_running 1\n'
    assert prom.totals(text, {"vllm:num_requests_running"}) == {"vllm:num_requests_running": 3.0}


def test_quoted_utf8_metric_name_inside_the_braces() -> None:
    # Prometheus 3 / OpenMetrics 2 may write the name quoted as the label set's first entry.
    line = '{"vllm:num_requests_running", "engine"="0",model_name="m"} 4.0'
    assert prom.parse_line(line) == (
        "vllm:num_requests_running",
        {"engine": "0", "model_name": "m"},
        4.0,
    )
    text = line + '\n{"vllm:num_requests_running",engine="1"} 1\n'
    assert prom.totals(text, {"vllm:num_requests_running"}) == {"vllm:num_requests_running": 5.0}


def test_label_value_with_brace_quote_and_backslash() -> None:
    line = r'vllm:num_requests_running{model_name="a \"b\" } c\\",engine="0"} 3.0'
    assert prom.parse_line(line) == (
        "vllm:num_requests_running",
        {"model_name": 'a "b" } c\\', "engine": "0"},
        3.0,
    )
