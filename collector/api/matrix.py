"""Matrix runs API (admin token): submit, list, inspect, cancel, reports, request records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from collector.deps import AdminDep, SessionDep
from collector.errors import NotFound
from collector.matrix import store as matrix_runs
from collector.matrix.latency import profile_latencies
from collector.matrix.presets import get_preset, preset_summary
from collector.matrix.report import render_markdown
from collector.matrix.results import MatrixReport
from collector.matrix.runner import run_report
from collector.matrix.spec import MatrixSpec, SpecError
from collector.models import Host

router = APIRouter(prefix="/api/v1/matrix-runs", tags=["matrix"])
presets_router = APIRouter(prefix="/api/v1/matrix-presets", tags=["matrix"])


@presets_router.get("")
def list_presets(_: AdminDep) -> dict[str, Any]:
    """The built-in presets a run can start from (`POST /api/v1/matrix-runs {preset, host}`)."""
    return {"presets": preset_summary()}


class RunRequest(BaseModel):
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


def _runner(request: Request) -> Any:
    return getattr(request.app.state, "matrix_runner", None)


@router.post("", status_code=201)
def create_run(
    body: RunRequest, request: Request, session: SessionDep, _: AdminDep
) -> dict[str, Any]:
    spec = _validate(body)
    schedule = None
    if spec.schedule is not None:
        schedule = matrix_runs.save_schedule(session, spec=spec, preset=body.preset)
    run = matrix_runs.create_run(
        session,
        spec=spec,
        preset=body.preset,
        schedule_id=schedule.id if schedule else None,
    )
    # Committed before the worker looks for it.
    session.commit()
    runner = _runner(request)
    if runner is not None:
        runner.submit(run.id)
        if schedule is not None:
            from collector.matrix.schedule import schedule_job

            scheduler = getattr(request.app.state, "scheduler", None)
            if scheduler is not None:
                schedule_job(scheduler, request.app.state.sessionmaker, runner, schedule)
    progress = matrix_runs.progress(session, [run])[run.id]
    return {**matrix_runs.run_summary(run), "host": spec.host, "progress": progress}


@router.get("")
def list_runs(session: SessionDep, _: AdminDep, limit: int = 100) -> list[dict[str, Any]]:
    runs = matrix_runs.list_runs(session, limit=min(max(limit, 1), 1000))
    progress = matrix_runs.progress(session, runs)
    return [
        {**matrix_runs.run_summary(r, session.get(Host, r.host_id)), "progress": progress[r.id]}
        for r in runs
    ]


@router.get("/{run_id}")
def get_run(run_id: int, session: SessionDep, _: AdminDep) -> dict[str, Any]:
    run = matrix_runs.get_run(session, run_id=run_id)
    return {
        **matrix_runs.run_summary(run, session.get(Host, run.host_id)),
        "progress": matrix_runs.progress(session, [run])[run.id],
        "spec": run.spec,
        "steps": [matrix_runs.step_dict(s) for s in matrix_runs.list_steps(session, run_id=run_id)],
        "report": run_report(session, run=run),
    }


@router.post("/{run_id}/cancel")
def cancel_run(run_id: int, request: Request, session: SessionDep, _: AdminDep) -> dict[str, Any]:
    run = matrix_runs.request_cancel(session, run_id=run_id)
    session.commit()
    runner = _runner(request)
    if runner is not None:
        runner.cancel(run_id)
    return matrix_runs.run_summary(run)


@router.get("/{run_id}/report.json")
def report_json(run_id: int, session: SessionDep, _: AdminDep) -> dict[str, Any]:
    return run_report(session, run=matrix_runs.get_run(session, run_id=run_id))


@router.get("/{run_id}/report.md", response_class=PlainTextResponse)
def report_md(run_id: int, session: SessionDep, _: AdminDep) -> PlainTextResponse:
    data = run_report(session, run=matrix_runs.get_run(session, run_id=run_id))
    data = {k: v for k, v in data.items() if k != "profiles"} | {
        "profiles": [{k: v for k, v in p.items() if k != "label"} for p in data["profiles"]]
    }
    return PlainTextResponse(
        render_markdown(MatrixReport.from_dict(data)), media_type="text/markdown; charset=utf-8"
    )


@router.get("/{run_id}/latencies")
def latencies(run_id: int, session: SessionDep, _: AdminDep) -> dict[str, Any]:
    """Per profile x repetition: request latency quantiles and points (s), for plotting."""
    run = matrix_runs.get_run(session, run_id=run_id)
    path = Path(run.requests_path) if run.requests_path else None
    return {"run_id": run_id, "profiles": profile_latencies(path, run_id=run_id)}


@router.get("/{run_id}/requests.jsonl")
def requests_jsonl(run_id: int, session: SessionDep, _: AdminDep) -> FileResponse:
    run = matrix_runs.get_run(session, run_id=run_id)
    if not run.requests_path or not Path(run.requests_path).is_file():
        raise NotFound(f"matrix run {run_id} has no request records")
    return FileResponse(run.requests_path, media_type="application/x-ndjson")
