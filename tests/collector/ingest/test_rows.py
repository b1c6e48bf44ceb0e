"""rows.py: a batch's lines built in one pass are the rows ``line_row`` builds one by one."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from agent.wire import MAX_LINE_BYTES
from collector.ingest.rows import agent_line_rows, line_row, to_json
from collector.schemas import Batch, truncate_line


def test_a_batch_of_lines_gives_the_rows_line_row_gives() -> None:
    texts = ["plain", "with\x00nul", "é" * MAX_LINE_BYTES, "tab\tand\nnewline"]
    batch = Batch.model_validate(
        {
            "host": "h",
            "boot_id": "b",
            "agent": {"version": "1", "pid": 1},
            "lines": [
                {
                    "seq": i,
                    "ts": 1764400000.5 + i,
                    "source": ["kmsg", "journal", "vllm", "kmsg"][i],
                    "priority": [None, 3, 6, 0][i],
                    "facility": [0, None, 1, 0][i],
                    "kseq": [10, None, None, 11][i],
                    "text": text,
                    "fields": [None, {"_TRANSPORT": "kernel"}, {"unit": "vllm"}, None][i],
                }
                for i, text in enumerate(texts)
            ],
        }
    )
    common = (4, 9, 1764400001.25)
    one_by_one = [
        line_row(
            common,
            seq=x["seq"],
            kseq=x.get("kseq"),
            ts=x["ts"],
            source=x["source"],
            priority=x.get("priority"),
            facility=x.get("facility"),
            text=truncate_line(x["text"])[0],
            truncated=truncate_line(x["text"])[1],
            fields=to_json(x.get("fields")),
            escaped=i in batch.escaped_lines,
        )
        for i, x in enumerate(batch.lines)
    ]
    rows = agent_line_rows(common, batch.lines, batch.escaped_lines)
    assert rows == one_by_one
    assert [row[10] for row in rows] == [False, False, True, False]  # truncated
    assert [row[15] for row in rows] == [False, True, False, False]  # escaped


def test_a_line_with_only_its_required_keys_and_an_unknown_one() -> None:
    """A line is a validated dict: what an agent left out is None in the row, what it added
    that ingest does not know is dropped, and a bad optional value still fails validation."""
    body = {
        "host": "h",
        "boot_id": "b",
        "agent": {"version": "1"},
        "lines": [{"seq": 7, "ts": 1764400000.5, "source": "kmsg", "text": "x", "color": "red"}],
    }
    batch = Batch.model_validate_json(json.dumps(body))
    assert batch.lines == [{"seq": 7, "ts": 1764400000.5, "source": "kmsg", "text": "x"}]
    [row] = agent_line_rows((1, 2, 3.0), batch.lines, batch.escaped_lines)
    assert row == line_row(
        (1, 2, 3.0), seq=7, kseq=None, ts=1764400000.5, source="kmsg", priority=None,
        facility=None, text="x", truncated=False, fields=None,
    )  # fmt: skip
    body["lines"][0]["priority"] = 8
    with pytest.raises(ValidationError, match=r"lines\.0\.priority"):
        Batch.model_validate_json(json.dumps(body))
