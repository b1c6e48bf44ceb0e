"""What ``/openapi.json`` says beyond the routes' own signatures: the ingest route reads its
body itself (gzip, a size limit before parsing), so its request body, an agent batch
(``schemas.Batch``), is documented here; and a refusal is JSON on every route, a text or
file download included (FastAPI would document it in the route's media type), as an
``ErrorOut``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from agent.wire import INGEST_PATH
from collector.schemas import Batch


def document_ingest_body(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with the ingest request body and the batch's schemas in its components."""
    batch = Batch.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(batch.pop("$defs", {}))
    schemas["Batch"] = batch
    body = {"$ref": "#/components/schemas/Batch"}
    spec["paths"][INGEST_PATH]["post"]["requestBody"] = {
        "required": True,
        "description": "one agent batch (JSON, gzip allowed with Content-Encoding: gzip)",
        "content": {"application/json": {"schema": body}},
    }
    return spec


def errors_as_json(spec: dict[str, Any]) -> dict[str, Any]:
    """Every 4xx response documented as ``application/json``."""
    for operations in spec["paths"].values():
        for operation in operations.values():
            for status, response in operation.get("responses", {}).items():
                content = response.get("content") or {}
                if status.startswith("4") and content and "application/json" not in content:
                    schema = next(iter(content.values())).get("schema", {})
                    response["content"] = {"application/json": {"schema": schema}}
    return spec


class FieldError(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class ErrorOut(BaseModel):
    """Why a request was refused (4xx): ``detail`` says it in words, or (a body that does not
    validate, FastAPI's shape) lists each field; ``errors`` names them where it is words."""

    detail: str | list[FieldError]
    errors: list[FieldError] | None = None


# Every route may answer these with an ``ErrorOut``.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "a parameter out of range, or a refused request"},
    401: {"model": ErrorOut, "description": "no valid admin token or session"},
    403: {"model": ErrorOut, "description": "a cross-origin request with the session cookie"},
    404: {"model": ErrorOut, "description": "no such host, run, incident or target"},
    409: {"model": ErrorOut, "description": "conflicts with the current state"},
    422: {"model": ErrorOut, "description": "a body that does not validate, or cannot be acted on"},
}
