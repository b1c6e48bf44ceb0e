"""docker-compose.yml and its nginx config hold together (Docker cannot run here): the
commands and variables are the real CLI's and settings, and the HA profile's proxy sends to
both replicas on the port they listen on."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from collector.cli import build_parser
from collector.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COLLECTORS = ("collector", "collector-2")


def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())  # type: ignore[no-any-return]


def nginx_conf(services: dict[str, Any]) -> str:
    (mount,) = [v for v in services["proxy"]["volumes"] if v.endswith("default.conf:ro")]
    return (ROOT / mount.split(":")[0]).read_text()


def test_the_ha_profile_adds_a_replica_and_a_proxy_to_the_plain_layout() -> None:
    services = compose()["services"]
    assert set(services) == {"db", *COLLECTORS, "proxy"}
    profiles = {name: s.get("profiles", []) for name, s in services.items()}
    assert profiles == {"db": [], "collector": [], "collector-2": ["ha"], "proxy": ["ha"]}


def test_replicas_run_the_real_serve_command_with_real_settings_on_one_database() -> None:
    services = compose()["services"]
    fields = set(Settings.model_fields)
    for name in COLLECTORS:
        service = services[name]
        args = build_parser().parse_args(service["command"][1:])
        assert service["command"][0] == "freezewatch-collector"
        assert (args.command, args.bind, args.port) == ("serve", "0.0.0.0", 8080)
        env = service["environment"]
        unknown = [k for k in env if k.removeprefix("FREEZEWATCH_").lower() not in fields]
        assert unknown == [], f"{name}: not a setting: {unknown}"
        assert "/healthz" in " ".join(service["healthcheck"]["test"])
        assert f":{args.port}/healthz" in " ".join(service["healthcheck"]["test"])
    one, two = (services[n] for n in COLLECTORS)
    assert one["environment"]["FREEZEWATCH_DB_URL"] == two["environment"]["FREEZEWATCH_DB_URL"]
    assert "@db/" in one["environment"]["FREEZEWATCH_DB_URL"]  # the compose PostgreSQL
    # Either replica may serve a matrix run's records: the data directory is one volume.
    data = one["environment"]["FREEZEWATCH_DATA_DIR"]
    assert one["volumes"] == two["volumes"] == [f"fwdata:{data}"]
    assert data in (ROOT / "Dockerfile").read_text()  # created there, owned by the user


def test_the_proxy_round_robins_over_both_replicas_on_their_port() -> None:
    services = compose()["services"]
    conf = nginx_conf(services)
    upstream = re.search(r"upstream freezewatch \{(.*?)\}", conf, re.S)
    assert upstream is not None
    servers = re.findall(r"^\s*server (\S+?)(?: |;)", upstream.group(1), re.M)
    port = build_parser().parse_args(services["collector"]["command"][1:]).port
    assert sorted(servers) == sorted(f"{n}:{port}" for n in COLLECTORS)
    assert "hash" not in upstream.group(1) and "ip_hash" not in upstream.group(1)
    (published,) = services["proxy"]["ports"]
    listen = re.search(r"listen (\d+);", conf)
    assert listen is not None and published.endswith(f":{listen.group(1)}")
    size = re.search(r"client_max_body_size (\d+)m;", conf)
    assert size is not None and int(size.group(1)) * 2**20 > Settings().max_body_bytes
    # Only ingest may be sent again to the other replica after it went out (it is idempotent).
    ingest = re.search(r"location = /api/v1/ingest \{(.*?)\}", conf, re.S)
    assert ingest is not None and "non_idempotent" in ingest.group(1)
    assert conf.count("non_idempotent") == 1
