"""Matrix runs API (admin token): submit, list, inspect, cancel, reports, request records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from sqlalchemy.orm import Session

from collector import db
from collector.deps import AdminDep, NowDep, RunnerDep, SchedulerDep, SessionDep
from collector.errors import NotFound
from collector.matrix import store
from collector.matrix.latency import ProfileLatency, profile_latencies
from collector.matrix.presets import PresetOut, get_preset, preset_summary
from collector.matrix.report import MatrixReportOut, render_markdown
from collector.matrix.results import MatrixReport
from collector.matrix.schedule import schedule_job
from collector.matrix.spec import MatrixSpec, SpecError
from collector.matrix.store import Progress, RunSummary, StepOut
from collector.models import Host, MatrixRun
from collector.params import Limit, RowId
from collector.schemas import InModel

router = APIRouter(prefix="/api/v1/matrix-runs", tags=["matrix"])
presets_router = APIRouter(prefix="/api/v1/matrix-presets", tags=["matrix"])


class Presets(BaseModel):
    presets: list[PresetOut]


class RunOut(RunSummary):
    progress: Progress


class RunDetail(RunOut):
    """A run with its spec (as submitted, validated), recorded steps and report (built now
    while the run is still going)."""

    spec: dict[str, Any]
    steps: list[StepOut]
    report: MatrixReportOut


class Latencies(BaseModel):
    run_id: int
    profiles: list[ProfileLatency]


def run_views(session: Session, runs: list[MatrixRun]) -> list[RunOut]:
    progress = store.progress(session, runs)
    return [
        RunOut(**dict(RunSummary.of(r, session.get(Host, r.host_id))), progress=progress[r.id])
        for r in runs
    ]


@presets_router.get("")
def list_presets(_: AdminDep) -> Presets:
    """The built-in presets a run can start from (`POST /api/v1/matrix-runs {preset, host}`)."""
    return Presets(presets=preset_summary())


class RunRequest(InModel):
    """Either a full spec, or a preset name and the host to run it on."""

    model_config = ConfigDict(extra="forbid")
    spec: dict[str, Any] | None = None
    preset: str | None = None
    host: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> RunRequest:
        if (self.spec is None) == (self.preset is None):
            raise ValueError("give either `spec` or `preset` (with `host`)")
        if self.preset is not None and not self.host:
            raise ValueError("`preset` needs `host`")
        return self


class SpecInvalid(Exception):
    """A spec failing validation: 422 with every offending field path."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(str(errors))
        self.errors = errors


def spec_invalid_response(exc: SpecInvalid) -> JSONResponse:
    where = ", ".join(".".join(str(p) for p in e["loc"]) for e in exc.errors[:5])
    return JSONResponse(
        {"detail": f"invalid matrix spec: {where}", "errors": exc.errors}, status_code=422
    )


def _validate(body: RunRequest) -> MatrixSpec:
    if body.preset is not None:
        try:
            return get_preset(body.preset, body.host or "")
        except SpecError as exc:
            error = {"loc": ["preset"], "msg": str(exc), "type": "value_error"}
            raise SpecInvalid([error]) from None
    try:
        return MatrixSpec.model_validate(body.spec)
    except ValidationError as exc:
        raise SpecInvalid(
            [
                {
                    "loc": ["spec", *e["loc"]],
                    "msg": e["msg"].removeprefix("Value error, "),
                    "type": e["type"],
                }
                for e in exc.errors(include_url=False, include_input=False)
            ]
        ) from None


@router.post("", status_code=201)
def create_run(
    body: RunRequest,
    session: SessionDep,
    runner: RunnerDep,
    scheduler: SchedulerDep,
    _: AdminDep,
) -> RunOut:
    spec = _validate(body)
    store.require_runnable(session, spec=spec)
    schedule = None
    if spec.schedule is not None:
        schedule = store.save_schedule(session, spec=spec, preset=body.preset)
    run = store.create_run(
        session,
        spec=spec,
        preset=body.preset,
        schedule_id=schedule.id if schedule else None,
    )
    [view] = run_views(session, [run])
    if runner is not None:
        # The worker looks the run up in the database: hand it over after the commit.
        run_id = run.id
        db.after_commit(session, lambda: runner.submit(run_id))
        if schedule is not None and scheduler is not None:
            schedule_id, cron = schedule.id, schedule.cron
            db.after_commit(
                session, lambda: schedule_job(scheduler, runner.factory, runner, schedule_id, cron)
            )
    return view


@router.get("")
def list_runs(session: SessionDep, _: AdminDep, limit: Limit = 100) -> list[RunOut]:
    return run_views(session, store.list_runs(session, limit=limit))


@router.get("/{run_id}")
def get_run(run_id: RowId, session: SessionDep, _: AdminDep) -> RunDetail:
    run = store.get_run(session, run_id=run_id)
    [view] = run_views(session, [run])
    return RunDetail(
        **dict(view),
        spec=run.spec,
        steps=[StepOut.model_validate(s) for s in store.list_steps(session, run_id=run_id)],
        report=MatrixReportOut.model_validate(store.run_report(session, run=run)),
    )


@router.post("/{run_id}/cancel")
def cancel_run(
    run_id: RowId, session: SessionDep, runner: RunnerDep, now: NowDep, _: AdminDep
) -> RunSummary:
    run = store.request_cancel(session, run_id=run_id, now=now)
    if runner is not None:
        db.after_commit(session, lambda: runner.cancel(run_id))
    return RunSummary.of(run)


@router.get("/{run_id}/report.json")
def report_json(run_id: RowId, session: SessionDep, _: AdminDep) -> MatrixReportOut:
    report = store.run_report(session, run=store.get_run(session, run_id=run_id))
    return MatrixReportOut.model_validate(report)


@router.get("/{run_id}/report.md", response_class=PlainTextResponse)
def report_md(run_id: RowId, session: SessionDep, _: AdminDep) -> PlainTextResponse:
    data = store.run_report(session, run=store.get_run(session, run_id=run_id))
    data = {k: v for k, v in data.items() if k != "profiles"} | {
        "profiles": [{k: v for k, v in p.items() if k != "label"} for p in data["profiles"]]
    }
    return PlainTextResponse(
        render_markdown(MatrixReport.from_dict(data)), media_type="text/markdown; charset=utf-8"
    )


@router.get("/{run_id}/latencies")
def latencies(run_id: RowId, session: SessionDep, _: AdminDep) -> Latencies:
    """Per profile x repetition: request latency quantiles and points (s), for plotting."""
    run = store.get_run(session, run_id=run_id)
    path = Path(run.requests_path) if run.requests_path else None
    return Latencies(run_id=run_id, profiles=profile_latencies(path, run_id=run_id))


class NdjsonFile(FileResponse):
    """A JSON-lines file (one request record a line)."""

    media_type = "application/x-ndjson"


@router.get("/{run_id}/requests.jsonl", response_class=NdjsonFile)
def requests_jsonl(run_id: RowId, session: SessionDep, _: AdminDep) -> NdjsonFile:
    run = store.get_run(session, run_id=run_id)
    if not run.requests_path or not Path(run.requests_path).is_file():
        raise NotFound(f"matrix run {run_id} has no request records")
    return NdjsonFile(run.requests_path, media_type=NdjsonFile.media_type)
