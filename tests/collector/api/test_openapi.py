"""/openapi.json describes every JSON response with a named schema, and nothing in it is
untyped: what a generated client needs to give each response a real type."""

from __future__ import annotations

from typing import Any

from fastapi.routing import APIRoute

from collector.vllm.status import VllmStartOut
from collector.vllm.store import PLAN_COLUMNS, PLAN_EXTRAS
from tests.collector.conftest import Collector


def is_json(content_type: str) -> bool:
    return content_type == "application/json" or content_type.endswith("+json")


def is_named(schema: dict[str, Any]) -> bool:
    """A reference to a component schema, a list of them, or a choice among them."""
    if "$ref" in schema:
        return True
    if schema.get("type") == "array":
        return is_named(schema.get("items", {}))
    choices = schema.get("anyOf") or schema.get("oneOf")
    return bool(choices) and all(is_named(c) for c in choices)


def untyped(node: Any, where: str) -> list[str]:
    """Paths of schemas that say nothing about their value (``{}``: pydantic's ``Any``)."""
    if isinstance(node, dict):
        found = [where] if node == {} else []
        for key, value in node.items():
            if key not in ("examples", "default"):
                found += untyped(value, f"{where}.{key}")
        return found
    if isinstance(node, list):
        return [p for i, value in enumerate(node) for p in untyped(value, f"{where}[{i}]")]
    return []


def test_every_json_success_response_has_a_named_schema(sqlite_collector: Collector) -> None:
    spec = sqlite_collector.client.get("/openapi.json").json()
    missing = []
    checked = 0
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if not status.startswith("2"):
                    continue
                for content_type, content in response.get("content", {}).items():
                    if not is_json(content_type):
                        continue
                    checked += 1
                    if not is_named(content.get("schema", {})):
                        missing.append(f"{method.upper()} {path} {status}: {content.get('schema')}")
    assert missing == []
    assert checked >= 20  # every JSON route of the API, not an empty document


def test_no_schema_leaves_a_value_untyped(sqlite_collector: Collector) -> None:
    """Free-form JSON (a sample's ``data``, a matrix spec) is an object; nothing is ``{}``."""
    spec = sqlite_collector.client.get("/openapi.json").json()
    assert untyped(spec["components"]["schemas"], "components") == []


def test_every_api_route_is_documented(sqlite_collector: Collector) -> None:
    app = sqlite_collector.client.app
    hidden = [
        r.path
        for r in app.routes  # type: ignore[attr-defined]
        if isinstance(r, APIRoute)
        and (r.path.startswith("/api/") or r.path == "/healthz")
        and not r.include_in_schema
    ]
    assert hidden == []


def test_non_json_downloads_say_their_media_type(sqlite_collector: Collector) -> None:
    paths = sqlite_collector.client.get("/openapi.json").json()["paths"]

    def media(path: str) -> list[str]:
        return list(paths[path]["get"]["responses"]["200"]["content"])

    assert media("/api/v1/incidents/{incident_id}/artifacts/{name}") == ["text/plain"]
    assert media("/api/v1/matrix-runs/{run_id}/requests.jsonl") == ["application/x-ndjson"]
    assert media("/api/v1/matrix-runs/{run_id}/report.md") == ["text/plain"]


def test_a_vllm_start_names_every_stored_plan_field() -> None:
    """A plan field the parser stores appears typed in the schema, not only as an extra."""
    assert set(PLAN_COLUMNS) | set(PLAN_EXTRAS) <= set(VllmStartOut.model_fields)
