"""A host's settings take only values the collector can live with: ``PATCH`` refuses a grace
outside 0.5 s..1 day (0 returns to the default), an ``ssh`` with a bad port, NUL in a text
field and an endless retention with a 422 naming the field, and an SSH key file the collector
cannot read with a 400; ``add-host`` and the API accept exactly the same host names (one rule,
``collector.hosts.names``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from collector.cli import main
from collector.errors import BadRequest
from collector.hosts.names import check_host_name
from tests.collector.conftest import Collector

REFUSED: list[tuple[dict[str, Any] | str, str]] = [
    ('{"grace_s": 1e400}', "grace_s"),
    ({"grace_s": 86400.5}, "grace_s"),
    ({"grace_s": 0.25}, "grace_s"),
    ({"grace_s": -1}, "grace_s"),
    ({"ssh": "root@spark:abc"}, "ssh"),
    ({"ssh": "root@spark:0"}, "ssh"),
    ({"ssh": "root@spark:65536"}, "ssh"),
    ({"ssh": "root@[fe80::1]:x"}, "ssh"),
    ({"ssh": "root@spark:２２"}, "ssh"),
    ({"ssh": "spark"}, "ssh"),
    ({"vllm_url": "http://a\x00b"}, "vllm_url"),
    ({"ssh_key_path": "/k\x00"}, "ssh_key_path"),
    ('{"retention": {"samples": 1e400}}', "retention"),
    ({"retention": {"samples": 1e9}}, "retention"),
]
ACCEPTED: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"grace_s": 0.5}, {"grace_s": 0.5}),
    ({"grace_s": 86400}, {"grace_s": 86400.0}),
    ({"grace_s": 0}, {"grace_s": None}),
    ({"ssh": "fw@[fe80::1]:2222"}, {"ssh": "fw@fe80::1:2222"}),
    ({"ssh": "fw@spark:65535"}, {"ssh": "fw@spark:65535"}),
    ({"ssh": "fw@spark"}, {"ssh": "fw@spark:22"}),
]


def test_a_setting_out_of_bounds_is_a_422_naming_it(collector: Collector) -> None:
    collector.add_host("spark-01")
    headers = {**collector.admin, "Content-Type": "application/json"}
    for body, field in REFUSED:
        text = body if isinstance(body, str) else json.dumps(body)
        r = collector.client.patch("/api/v1/hosts/spark-01", content=text, headers=headers)
        assert r.status_code == 422, (body, r.text)
        [error] = r.json()["detail"]
        # Named by its place, or (NUL, non-finite numbers: refused anywhere in a body) in words.
        assert error["loc"][:2] == ["body", field] or f"at /{field}" in error["msg"], r.text
    # Nothing changed, and the host still takes batches (a huge grace used to break ingest).
    config = collector.read("/api/v1/hosts/spark-01")["config"]
    assert (config["grace_s"], config["ssh"], config["retention"]) == (None, None, {})


def test_the_edges_are_accepted(collector: Collector) -> None:
    collector.add_host("spark-01")
    for body, shown in ACCEPTED:
        r = collector.client.patch("/api/v1/hosts/spark-01", json=body, headers=collector.admin)
        assert r.status_code == 200, (body, r.text)
        assert {k: r.json()["config"][k] for k in shown} == shown


def test_an_empty_ssh_clears_it(sqlite_collector: Collector) -> None:
    c = sqlite_collector
    c.add_host("spark-01")
    url = "/api/v1/hosts/spark-01"
    assert c.client.patch(url, json={"ssh": "fw@spark"}, headers=c.admin).status_code == 200
    r = c.client.patch(url, json={"ssh": ""}, headers=c.admin)
    assert r.status_code == 200 and r.json()["config"]["ssh"] is None


def test_a_key_file_the_collector_cannot_read_is_refused(
    sqlite_collector: Collector, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    c = sqlite_collector
    c.add_host("spark-01")
    url = "/api/v1/hosts/spark-01"
    key = tmp_path / "id_ed25519"
    for path, why in [(key, "does not exist"), (tmp_path, "is not a file")]:
        r = c.client.patch(url, json={"ssh_key_path": str(path)}, headers=c.admin)
        assert r.status_code == 400 and r.json()["detail"] == (
            f"SSH key file {path} {why} (on the collector's machine)"
        ), r.text
    # add-host says so and registers nothing.
    db = c.settings.db_url
    assert main(["--db", db, "add-host", "spark-02", "--ssh", "fw@spark", "--key", str(key)]) == 1
    assert f"error: SSH key file {key} does not exist" in capsys.readouterr().err
    assert [h["name"] for h in c.read("/api/v1/hosts")] == ["spark-01"]
    assert c.read(url)["config"]["ssh_key_path"] is None
    key.write_text("a key file the collector can read\n")
    assert main(["--db", db, "add-host", "spark-02", "--ssh", "fw@spark", "--key", str(key)]) == 0
    r = c.client.patch(url, json={"ssh_key_path": str(key)}, headers=c.admin)
    assert r.status_code == 200 and r.json()["config"]["ssh_key_path"] == str(key)
    assert c.client.patch(url, json={"ssh_key_path": ""}, headers=c.admin).status_code == 200
    assert c.read(url)["config"]["ssh_key_path"] is None


NAMES_REFUSED = ["a/b", "a b", "-rf", ".hidden", "", "é", "a\x00b", "a" * 254, "spark?x", "a%2Fb"]
NAMES_TAKEN = ["spark-01", "gpu_7", "spark.lab.example.com", "A" * 253, "7"]


def test_add_host_refuses_a_name_the_api_cannot_reach(sqlite_collector: Collector) -> None:
    url = sqlite_collector.settings.db_url
    for name in NAMES_REFUSED:
        with pytest.raises(BadRequest):
            check_host_name(name)
        if "\x00" not in name:  # an argv cannot carry NUL
            assert main(["--db", url, "add-host", "--", name]) == 1, name
    assert sqlite_collector.read("/api/v1/hosts") == []


@pytest.mark.parametrize("name", NAMES_TAKEN)
def test_every_name_add_host_takes_the_api_reaches(
    name: str, sqlite_collector: Collector, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sqlite_collector.settings.db_url
    assert main(["--db", url, "add-host", name]) == 0
    assert sqlite_collector.read(f"/api/v1/hosts/{name}")["name"] == name
    assert sqlite_collector.read(f"/api/v1/hosts/{name}/lines")["host"] == name


def test_rotate_token_says_it_replaced_the_token(
    sqlite_collector: Collector, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sqlite_collector.settings.db_url
    assert main(["--db", url, "add-host", "spark-01"]) == 0
    assert "'spark-01' registered; agent token" in capsys.readouterr().out
    assert main(["--db", url, "add-host", "spark-01", "--rotate-token"]) == 0
    out = capsys.readouterr().out
    assert "'spark-01' has a new agent token, the old one no longer works" in out
    assert out.splitlines()[-1].startswith("fwh_")


# ("/" and "%2F" never reach the route: the router answers 404.)
@pytest.mark.parametrize("name", [n for n in NAMES_REFUSED if n and "/" not in n and "%" not in n])
def test_the_api_refuses_the_same_names_with_a_400(name: str, sqlite_collector: Collector) -> None:
    path = f"/api/v1/hosts/{quote(name, safe='')}"
    r = sqlite_collector.client.get(path, headers=sqlite_collector.admin)
    assert r.status_code == 400, r.text
    assert "parameter name" in r.json()["detail"]
