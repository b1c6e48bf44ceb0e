"""Samples are stored packed (``collector.packing``) and read back as the agent sent them, on
SQLite and PostgreSQL: every value of ``data``, the burst flag and the figures read from it,
the same as when the whole sample was stored as JSON."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from sqlalchemy import func, select

from collector import db
from collector.hosts import registry
from collector.ingest import templates
from collector.ingest.batch import ingest_batch
from collector.models import Sample, SampleTemplate
from collector.readback.series import samples_out
from collector.schemas import Batch, WireSample, number
from collector.timeutil import from_epoch
from tests.collector.conftest import Collector
from tests.collector.ingest.test_batch import batch, post
from tests.collector.packing.test_packing import host_sample

START = 1764400000.0


def wire(seq: int, data: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"seq": seq, "ts": START + seq, **data, **extra}


def stored_json(sample: dict[str, Any]) -> dict[str, Any]:
    """What ingest stored as a sample's ``data`` when it was whole JSON, and its typed load1
    and gpu_power_w columns."""
    parsed = WireSample.model_validate(sample)
    return {
        "data": parsed.model_dump(exclude={"seq", "ts", "burst"}, exclude_none=True),
        "burst": parsed.burst,
        "load1": (parsed.load or {}).get("1"),
        "gpu_power_w": number(parsed.first_gpu().get("power_w")),
    }


def read_back(c: Collector, host: str) -> list[dict[str, Any]]:
    samples = c.read(f"/api/v1/hosts/{host}/samples", limit=100)["samples"]
    keys = ("data", "burst", "load1", "gpu_power_w")
    return [{k: s[k] for k in keys} for s in samples]


def text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def test_samples_read_back_as_sent_whatever_moved(collector: Collector) -> None:
    token = collector.add_host("spark-01")
    rng = random.Random(11)
    sent = [wire(seq, host_sample(rng, seq)) for seq in range(1, 7)]
    sent[1]["burst"] = True
    sent[2]["vllm"][0] |= {"health": None, "error": "connection refused", "running": 2.5}
    sent[3]["extra"] = {"agent_note": "new section", "n": [1, 2.0, None]}  # a new shape
    sent[4]["mem"] |= {"MemFree": 1.5, "Dirty": -0.0}
    sent[5]["vmstat"]["pswpin"] = 3.25  # null in the first sample: another shape
    for part in (sent[:2], sent[2:4], sent[4:]):
        assert post(collector, token, batch(samples=part)).status_code == 200

    back = read_back(collector, "spark-01")
    assert text(back) == text([stored_json(s) for s in sent])
    factory = collector.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.read_scope(factory) as session:
        shapes = session.scalar(select(func.count()).select_from(SampleTemplate))
    # One a shape, not a batch: the first (the null health and the changed types keep its keys
    # and as many nulls), the one with "extra", the one with a vmstat rate where it had a null
    assert shapes == 3


def test_a_template_from_a_rolled_back_batch_is_never_used(collector: Collector) -> None:
    """A batch that rolls back takes its new template with it (SQLite hands its id out again):
    later batches of that shape make a new one, and every sample reads back as sent."""
    collector.add_host("spark-01")
    factory = collector.client.app.state.sessionmaker  # type: ignore[attr-defined]
    rng = random.Random(12)
    first = wire(1, host_sample(rng, 1))
    other_shape = wire(2, host_sample(rng, 2), extra={"k": 1})
    same_as_first = wire(3, host_sample(rng, 3))

    def ingest(sample: dict[str, Any]) -> None:
        body = Batch.model_validate(batch(samples=[sample]))
        with db.session_scope(factory) as session:
            host = registry.get_host(session, name="spark-01")
            ingest_batch(session, host_id=host.id, batch=body, received_at=START + 10,
                         now=from_epoch(START + 10), settings=collector.settings)  # fmt: skip
            if sample is first:
                raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        ingest(first)
    ingest(other_shape)
    ingest(same_as_first)
    assert text(read_back(collector, "spark-01")) == text(
        [stored_json(s) for s in (other_shape, same_as_first)]
    )


def test_a_host_whose_shape_keeps_changing_is_stored_plain_past_the_days_templates(
    collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(templates, "NEW_PER_DAY", 2)
    token = collector.add_host("spark-01")
    rng = random.Random(13)
    sent = [wire(seq, host_sample(rng, seq), extra={f"key{seq}": seq}) for seq in range(1, 5)]
    for sample in sent:
        assert post(collector, token, batch(samples=[sample])).status_code == 200
    assert text(read_back(collector, "spark-01")) == text([stored_json(s) for s in sent])
    factory = collector.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.read_scope(factory) as session:
        rows = list(session.scalars(select(Sample).order_by(Sample.seq)))
        assert [r.template_id is not None for r in rows] == [True, True, False, False]
        assert samples_out(rows)[3].data == stored_json(sent[3])["data"]
