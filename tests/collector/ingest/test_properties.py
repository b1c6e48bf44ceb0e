"""Property tests of POST /api/v1/ingest on SQLite and PostgreSQL: whatever JSON value lands in
any field, the answer is a 2xx (every record stored) or a 4xx (nothing stored), never a 5xx.

The inputs are synthetic test values (NUL characters, huge and non-finite numbers, kernel-looking
text with out-of-range numbers), not real log lines.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from collector import db
from collector.models import AgentEvent, Line, Sample
from tests.collector.conftest import Collector
from tests.collector.ingest.test_batch import batch, kline, post, sample

# Bounded: each example is one real POST (and one COPY on PostgreSQL).
EXAMPLES = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**31, 2**63, -(2**63) - 1, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=st.sampled_from(["a", "\x00", "\\", "é", "\ud7ff", " ", "\n"]), max_size=8),
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
# Kernel-looking text whose numbers may not fit a column (test inputs, not real lines).
big = st.integers(min_value=0, max_value=10**25).map(str)
kernel_texts = st.one_of(
    st.builds("NVRM: Xid (PCI:0000:01:00): {}, pid={}, name=python3, Ch 00000008".format, big, big),
    st.builds("watchdog: BUG: soft lockup - CPU#{} stuck for 26s! [python3:{}]".format, big, big),
    st.builds("INFO: task python3:{} blocked for more than 120 seconds.".format, big),
    st.builds("Out of memory: Killed process {} (python3) total-vm:1kB".format, big),
    st.text(alphabet=st.sampled_from(["N", "V", "R", "M", ":", "\x00", " ", "X", "i", "d", "9"])),
)

RECORD_FIELDS = {
    "samples": ["seq", "ts", "mem", "psi", "vmstat", "load", "gpu", "vllm", "burst", "extra"],
    "lines": ["seq", "ts", "source", "priority", "facility", "kseq", "text", "fields"],
    "events": ["seq", "ts", "kind", "data"],
}
TOP_FIELDS = ["boot_id", "agent", "backlog"]
AGENT_FIELDS = ["version", "pid", "started_at", "boot_id", "sent_at"]


def counts(c: Collector) -> tuple[int, int, int]:
    factory = c.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.session_scope(factory) as session:
        return tuple(  # type: ignore[return-value]
            session.scalar(select(func.count()).select_from(model))
            for model in (Sample, Line, AgentEvent)
        )


@st.composite
def mutated_batches(draw: st.DrawFn) -> dict[str, Any]:
    seq = draw(st.integers(min_value=1, max_value=2**40))
    body = batch(
        samples=[sample(seq)],
        lines=[kline(seq, seq, draw(kernel_texts))],
        events=[{"seq": seq, "ts": 1764400000.0, "kind": "source_error", "data": {}}],
    )
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        where = draw(st.sampled_from(["top", "agent", *RECORD_FIELDS]))
        value = draw(json_values)
        if where == "top":
            body[draw(st.sampled_from(TOP_FIELDS))] = value
        elif where == "agent" and isinstance(body["agent"], dict):
            body["agent"][draw(st.sampled_from(AGENT_FIELDS))] = value
        elif where in RECORD_FIELDS:
            body[where][0][draw(st.sampled_from(RECORD_FIELDS[where]))] = value
    return body


def host_token(c: Collector) -> str:
    """One host for all the examples a fixture instance sees."""
    if "token" not in c.__dict__:
        c.__dict__["token"] = c.add_host("spark-01")
    return str(c.__dict__["token"])


def post_checked(c: Collector, token: str, body: dict[str, Any]) -> None:
    before = counts(c)
    # allow_nan: NaN and Infinity reach the collector as the tokens Python writes
    resp = post(c, token, json.dumps(body, allow_nan=True).encode())
    assert resp.status_code < 500, resp.text
    after = counts(c)
    if resp.status_code >= 400:
        assert after == before, "a refused batch stored something"
        return
    answer = resp.json()
    for i, stream in enumerate(("samples", "lines", "events")):
        assert answer["stored"][stream] + answer["duplicates"][stream] == len(body.get(stream, []))
        assert after[i] - before[i] == answer["stored"][stream], "a partial batch"


@EXAMPLES
@given(body=mutated_batches())
def test_any_value_in_any_field_is_a_2xx_or_4xx_never_partial(
    collector: Collector, body: dict[str, Any]
) -> None:
    token = host_token(collector)
    post_checked(collector, token, body)


@EXAMPLES
@given(seq=st.integers(min_value=1, max_value=2**40), text=st.text(max_size=40), fields=json_values)
def test_any_line_text_is_stored(collector: Collector, seq: int, text: str, fields: Any) -> None:
    token = host_token(collector)
    line = {**kline(seq, seq, text), "source": "vllm", "kseq": None}
    line["fields"] = fields if isinstance(fields, dict) else {"v": fields}
    post_checked(collector, token, batch(lines=[line]))


# The keys of a line's free-form ``fields`` that ingest reads (journal transport, pstore file
# and order, the kernel's usec that matches a journal record to its other copies).
READ_KEYS = ["_TRANSPORT", "pstore_file", "pstore_dir", "line_no", "_SOURCE_MONOTONIC_TIMESTAMP",
             "usec"]  # fmt: skip
read_values = st.one_of(json_values, st.sampled_from(["kernel", "dmesg-ramoops-0", "12", "x"]))


@st.composite
def lines_with_read_fields(draw: st.DrawFn) -> list[dict[str, Any]]:
    first = draw(st.integers(min_value=1, max_value=2**40))
    lines = []
    for seq in range(first, first + draw(st.integers(min_value=1, max_value=4))):
        line = {
            **kline(seq, seq, draw(kernel_texts)),
            "source": draw(st.sampled_from(["journal", "kmsg"])),
        }
        if draw(st.booleans()):
            line["kseq"] = None
        line["fields"] = draw(st.dictionaries(st.sampled_from(READ_KEYS), read_values, max_size=4))
        lines.append(line)
    return lines


@EXAMPLES
@given(lines=lines_with_read_fields())
def test_any_value_in_the_fields_ingest_reads_is_a_2xx_or_4xx(
    collector: Collector, lines: list[dict[str, Any]]
) -> None:
    """A pstore file's lines, journal kernel records and kmsg records without a kseq are read
    by ingest through their ``fields``: whatever JSON is there, never a 5xx."""
    token = host_token(collector)
    post_checked(collector, token, batch(lines=lines))
