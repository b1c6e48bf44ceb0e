"""A host's vLLM at a glance: current phase, health from the latest sample, startup plans."""

from __future__ import annotations

from pydantic import ConfigDict
from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.models import Host, HostEvent, VllmPhase, VllmStart
from collector.readback.series import latest_sample
from collector.schemas import OutModel, ReportedNumber, ReportedScalar
from collector.vllm.store import PLAN_COLUMNS, PLAN_EXTRAS


class EndpointHealth(OutModel):
    """One vLLM endpoint in the latest sample, as the agent measured it: ``health`` the /health
    HTTP status (null when nothing answered), the /metrics figures, ``error`` why not."""

    url: ReportedScalar
    health: ReportedScalar
    health_ms: ReportedNumber
    running: ReportedNumber
    waiting: ReportedNumber
    kv_usage: ReportedNumber
    preemptions: ReportedNumber
    generation_tokens: ReportedNumber
    error: ReportedScalar


class PhaseMark(OutModel):
    phase: str
    ts: float
    line_id: int | None


class VllmStartOut(OutModel):
    """One server start: its startup plan (null where the log did not say), outcome, anomalies
    and phase timeline."""

    # Plan fields a newer parser adds still come through, untyped, until they are named here.
    model_config = ConfigDict(extra="allow")
    id: int
    started_ts: float
    phase: str | None
    outcome: str
    error: str | None
    vllm_version: str | None
    model_load_gib: float | None
    model_load_s: float | None
    drafter_loaded: bool
    cuda_graph_estimate_gib: float | None
    kv_cache_gib: float | None
    kv_cache_tokens: int | None
    max_concurrency: float | None
    max_concurrency_tokens: int | None
    cuda_graph_pool_actual_gib: float | None
    cuda_graph_pool_estimated_gib: float | None
    cuda_graph_capture_gib: ReportedNumber
    cuda_graph_capture_s: ReportedNumber
    init_engine_s: ReportedNumber
    kv_cache_blocks: ReportedNumber
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: ReportedNumber = None
    dtype: str | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    enforce_eager: bool | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_chunked_prefill: bool | None = None
    enable_prefix_caching: bool | None = None
    attention_backend: str | None = None
    speculative_method: str | None = None
    num_speculative_tokens: int | None = None
    anomalies: list[str]
    phases: list[PhaseMark]


class VllmHealth(OutModel):
    """Health from the latest sample (``sample_ts``) and whether the server looks hung."""

    sample_ts: float | None
    endpoints: list[EndpointHealth]
    hung: bool
    hung_since: ReportedNumber


class VllmStatus(OutModel):
    """A host's vLLM: current phase, health, the newest start's ``plan`` and ``plans``
    (newest first)."""

    host: str
    phase: str | None
    health: VllmHealth
    plan: VllmStartOut | None
    plans: list[VllmStartOut]


def latest_vllm_phase(session: Session, *, host_id: int) -> str | None:
    """The phase of the host's latest vLLM server start (None before any)."""
    return session.scalar(
        select(VllmStart.phase)
        .where(VllmStart.host_id == host_id)
        .order_by(VllmStart.started_ts.desc(), VllmStart.id.desc())
        .limit(1)
    )


def start_out(start: VllmStart, phases: list[VllmPhase]) -> VllmStartOut:
    plan = start.plan or {}
    return VllmStartOut.model_validate(
        {
            "id": start.id,
            "started_ts": start.started_ts,
            "phase": start.phase,
            "outcome": start.outcome,
            "error": start.error,
            **{name: getattr(start, name) for name in PLAN_COLUMNS},
            **{name: plan.get(name) for name in PLAN_EXTRAS},
            "anomalies": list(start.anomalies or []),
            "phases": sorted(phases, key=lambda p: (p.ts, p.id)),
        }
    )


def vllm_status(session: Session, *, host: Host, history: int = 20) -> VllmStatus:
    """The /hosts/{name}/vllm document; ``plans`` newest first, ``plan`` is the newest."""
    starts = list(
        session.scalars(
            select(VllmStart)
            .where(VllmStart.host_id == host.id)
            .order_by(VllmStart.started_ts.desc(), VllmStart.id.desc())
            .limit(history)
        )
    )
    phases: dict[int, list[VllmPhase]] = {s.id: [] for s in starts}
    if starts:
        for phase in session.scalars(select(VllmPhase).where(VllmPhase.start_id.in_(phases))):
            phases[phase.start_id].append(phase)
    plans = [start_out(s, phases[s.id]) for s in starts]

    sample = latest_sample(session, host_id=host.id)
    entries = (sample.data or {}).get("vllm") if sample is not None else None
    health = [
        {key: e.get(key) for key in EndpointHealth.model_fields}
        for e in entries or []
        if isinstance(e, dict)
    ]
    hang = session.scalars(
        select(HostEvent)
        .where(HostEvent.host_id == host.id, HostEvent.kind.in_(("vllm_hung", "vllm_resumed")))
        .order_by(HostEvent.ts.desc(), HostEvent.id.desc())
        .limit(1)
    ).first()
    return VllmStatus.model_validate(
        {
            "host": host.name,
            "phase": plans[0].phase if plans else None,
            "health": {
                "sample_ts": sample.ts if sample is not None else None,
                "endpoints": health,
                "hung": hang is not None and hang.kind == "vllm_hung",
                "hung_since": hang.data.get("since") if hang and hang.kind == "vllm_hung" else None,
            },
            "plan": plans[0] if plans else None,
            "plans": plans,
        }
    )
