"""0017_compact_samples: samples stored as whole JSON (a database filled at 0015) read back the
same once migrated, on SQLite and PostgreSQL, and the same again once downgraded."""

from __future__ import annotations

import json
import random
from typing import Any

import sqlalchemy as sa
from alembic import command
from sqlalchemy import select

from collector import db
from collector.ingest.rows import typed_columns
from collector.models import Sample, SampleTemplate
from collector.readback.series import samples_json
from collector.schemas import WireSample, number
from tests.collector.packing.test_packing import host_sample

START = 1764400000.0
ROWS = 2300  # more than one batch of the migration (2,000)
OLD = sa.table(
    "samples",
    *(sa.column(n) for n in ("host_id", "boot_pk", "seq", "ts", "received_at", "burst")),
    *(sa.column(n) for n in ("mem_total", "mem_available", "mem_free", "swap_used")),
    *(sa.column(n) for n in ("psi_mem_some_avg10", "psi_mem_full_avg10", "psi_cpu_some_avg10")),
    *(sa.column(n) for n in ("psi_io_some_avg10", "psi_io_full_avg10", "load1", "gpu_util")),
    *(sa.column(n) for n in ("gpu_mem_used", "gpu_power_w", "vllm_running", "vllm_waiting")),
    sa.column("vllm_kv_usage"),
    sa.column("data", sa.JSON()),
)
TYPED = ("mem_total", "mem_available", "mem_free", "swap_used", "gpu_mem_used",
         "psi_mem_some_avg10", "psi_mem_full_avg10", "psi_cpu_some_avg10", "psi_io_some_avg10",
         "psi_io_full_avg10", "gpu_util", "vllm_running", "vllm_waiting",
         "vllm_kv_usage")  # fmt: skip


def old_row(i: int, rng: random.Random) -> dict[str, Any]:
    """A sample row as 0015's ingest wrote it: typed columns and the whole sample as JSON."""
    host = 1 + i % 2  # two hosts, samples over two days, a few odd ones
    body = {"seq": i, "ts": START + i * 60, **host_sample(rng, i), "burst": i % 7 == 0}
    if i % 50 == 0:
        body["vllm"][0] |= {"health": None, "error": "timed out", "running": None}
    if i % 75 == 0:
        body["extra"] = {"note": "é", "n": [1, -0.0, 2**63 - 1]}
    sample = WireSample.model_validate(body)
    return {
        "host_id": host, "boot_pk": host, "seq": i, "ts": sample.ts,
        "received_at": START + i * 60 + 0.25, "burst": sample.burst,
        **dict(zip(TYPED, typed_columns(sample), strict=True)),
        "load1": (sample.load or {}).get("1"),
        "gpu_power_w": number(sample.first_gpu().get("power_w")),
        "data": sample.model_dump(exclude={"seq", "ts", "burst"}, exclude_none=True),
    }  # fmt: skip


def text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=False)


def test_samples_stored_as_json_read_back_the_same_after_0017_and_back(db_url: str) -> None:
    config = db.alembic_config(db_url)
    command.upgrade(config, "0015_retention")
    rng = random.Random(17)
    rows = [old_row(i, rng) for i in range(ROWS)]
    engine = db.make_engine(db_url)
    with engine.begin() as conn:
        conn.execute(OLD.insert(), rows)

    command.upgrade(config, "0017_compact_samples")
    with db.read_scope(db.make_sessionmaker(engine)) as session:
        samples = list(session.scalars(select(Sample).order_by(Sample.seq)))
        out = samples_json(samples)
        templates = session.scalar(select(sa.func.count()).select_from(SampleTemplate))
        assert len(samples) == ROWS
        for row, sample, shown in zip(rows, samples, out, strict=True):
            assert text(sample.data) == text(row["data"])
            assert (sample.burst, sample.load1, sample.gpu_power_w) == (
                row["burst"], row["load1"], row["gpu_power_w"]
            )  # fmt: skip
            assert {n: getattr(sample, n) for n in TYPED} == {n: row[n] for n in TYPED}
            assert shown["data"] == row["data"] and shown["received_at"] == row["received_at"]
    # per host and day: the plain shape, a null vLLM health, the extra section
    assert 2 * 2 * 2 < templates <= 2 * 2 * 3

    command.downgrade(config, "0015_retention")
    with engine.connect() as conn:
        back = [dict(r._mapping) for r in conn.execute(select(OLD).order_by(OLD.c.seq))]
    engine.dispose()
    for row, before in zip(back, rows, strict=True):
        row["burst"] = bool(row["burst"])  # SQLite's 1 and 0 (the column is untyped here)
        assert {k: v for k, v in row.items() if text(v) != text(before[k])} == {}, row["seq"]
