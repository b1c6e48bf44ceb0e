"""schemathesis against the collector's own ``/openapi.json``, with the admin token, on SQLite
and on PostgreSQL: for every operation, generated requests (valid ones and invalid ones) never
get a 5xx, and every answer conforms to the schema (status code, content type, body).

Excluded, because it would connect outside this machine: ``POST /api/v1/webhooks/{id}/test``
(an HTTP request to the target's URL). The routes that reach a host over SSH (deploy, PATCH
``trust_host_key``, matrix runs) stay in: the app is given an SSH layer that refuses to
connect, so their error paths are what is tested. Bounded and derandomized, so CI runs the
same requests every time (``MAX_EXAMPLES`` each).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, settings
from schemathesis.transport.requests import REQUESTS_TRANSPORT

from agent.wire import INGEST_PATH
from collector import db
from collector.hosts import registry
from collector.main import create_app
from collector.remote.connect import SSHConnectError, SSHTarget
from collector.remote.ssh import SSHClient
from collector.settings import Settings
from tests.collector.conftest import ADMIN_TOKEN

MAX_EXAMPLES = 8
# tests/collector/ingest/test_properties.py throws arbitrary JSON at every field of a batch;
# here it only joins the rest of the API.
INGEST_EXAMPLES = 5
# Not checked, and why: the 405 of a method a path lacks lists only the methods of one of its
# routes (Starlette matches per route); and some rules span fields, which the schema cannot
# say (a json target needs an http(s) URL; a matrix run needs a host with SSH settings), so a
# schema-valid request may rightly be refused.
NOT_CHECKED = [
    schemathesis.checks.unsupported_method,
    schemathesis.checks.allow_header_conformance,
    schemathesis.checks.positive_data_acceptance,
]
HOST = "spark-01"
OUTSIDE = ["/api/v1/webhooks/{target_id}/test"]


class NoNetworkSSH(SSHClient):
    """Every SSH use fails as an unreachable host would: nothing leaves this machine."""

    def _refuse(self, target: SSHTarget | str, *args: Any, **kwargs: Any) -> Any:
        host = target if isinstance(target, str) else target.host
        raise SSHConnectError(host, "no network in this test")

    run = start_group = put_file = forward_local_port = _refuse  # type: ignore[assignment]

    def fetch_host_key(self, host: str, port: int, timeout: float) -> tuple[str, str]:
        raise SSHConnectError(host, "no network in this test")


def openapi() -> dict[str, Any]:
    """``/openapi.json`` as the app serves it (no database needed to read it)."""
    app = create_app(Settings(db_url="sqlite://", admin_token=ADMIN_TOKEN, run_scheduler=False))
    spec: dict[str, Any] = TestClient(app).get("/openapi.json").json()
    return spec


# The schemas load when a test runs, not at collection: schemathesis builds every operation's
# coverage cases as it makes a test, which took ~14 s in each pytest-xdist worker (each one
# collects every file) for tests that run in one of them.
@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return openapi()


@pytest.fixture(scope="module")
def api_schema(spec: dict[str, Any]) -> Any:
    schema = schemathesis.openapi.from_dict(spec).exclude(path=INGEST_PATH)
    for path in OUTSIDE:
        schema = schema.exclude(path=path)
    return schema


@pytest.fixture(scope="module")
def ingest_api_schema(spec: dict[str, Any]) -> Any:
    schema = schemathesis.openapi.from_dict(spec).include(path=INGEST_PATH)
    # Its coverage phase (a boundary value for every field of every nested record) alone would
    # take longer than the rest of the API.
    schema.config.phases.coverage.enabled = False
    return schema


@pytest.fixture(autouse=True)
def node_id_for_lazy_schemas(request: pytest.FixtureRequest) -> None:
    """schemathesis 4.32's lazy schemas read and rename ``node._nodeid``, which pytest 9.2's
    nodes no longer have (they keep ``_id``); given one, its per-operation names go to an
    attribute nothing else reads, and each operation is still reported as a subtest."""
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid


class Api:
    def __init__(self, client: TestClient, host_token: str) -> None:
        self.client, self.host_token = client, host_token


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def api(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """A collector on each database with a host, so some requests find something."""
    if request.param == "sqlite":
        url = f"sqlite:///{Path(tmp_path_factory.mktemp('schemathesis')) / 'fw.db'}"
    else:
        url = request.getfixturevalue("fresh_postgres_url")
    settings = Settings(
        db_url=url,
        admin_token=ADMIN_TOKEN,
        run_scheduler=False,
        data_dir=str(tmp_path_factory.mktemp("data")),
    )
    with TestClient(create_app(settings, ssh=NoNetworkSSH())) as client:
        factory = client.app.state.sessionmaker  # type: ignore[attr-defined]
        with db.session_scope(factory) as session:
            _host, token = registry.create_host(session, name=HOST)
        yield Api(client, token)


def request_of(case: Any, token: str) -> dict[str, Any]:
    """The case as schemathesis would send it (its serializers), as ``TestClient.request``
    arguments."""
    auth = {"Authorization": f"Bearer {token}"}
    data = REQUESTS_TRANSPORT.serialize_case(case, base_url="http://testserver", headers=auth)
    kwargs = {k: data[k] for k in ("method", "url", "headers", "params") if k in data}
    if "json" in data:
        kwargs["json"] = data["json"]
    elif data.get("data") is not None:
        kwargs["content"] = data["data"]
    return kwargs


SETTINGS = {
    "deadline": None,
    "derandomize": True,
    "database": None,
    "phases": [Phase.explicit, Phase.generate],
    "suppress_health_check": list(HealthCheck),
}


@schemathesis.pytest.from_fixture("api_schema").parametrize()
@pytest.mark.usefixtures("api")  # a lazy schema's test takes its parameters from its marks
@settings(max_examples=MAX_EXAMPLES, **SETTINGS)
def test_no_request_gets_a_server_error(case: Any, api: Api) -> None:
    response = api.client.request(**request_of(case, ADMIN_TOKEN))
    case.validate_response(response, excluded_checks=NOT_CHECKED)


@schemathesis.pytest.from_fixture("ingest_api_schema").parametrize()
@pytest.mark.usefixtures("api")
@settings(max_examples=INGEST_EXAMPLES, **SETTINGS)
def test_no_batch_gets_a_server_error(case: Any, api: Api) -> None:
    response = api.client.request(**request_of(case, api.host_token))
    case.validate_response(response, excluded_checks=NOT_CHECKED)
