"""Hundreds of hosts: GET /api/v1/hosts and the hosts page filter by status, name and label and
page through the rest, on SQLite and PostgreSQL; labels are set by PATCH and by add-host."""

from __future__ import annotations

from typing import Any

from sqlalchemy import update

from collector import db
from collector.cli import main
from collector.hosts import registry
from collector.models import Host, HostStatus
from tests.collector.conftest import ADMIN_TOKEN, Collector

# name -> (status, labels)
FLEET = {
    "spark-01": (HostStatus.UP, {"lab": "a", "rack": "1"}),
    "spark-02": (HostStatus.LOST, {"lab": "a", "rack": "2"}),
    "Spark-03": (HostStatus.UP, {"lab": "b"}),
    "gb200-01": (HostStatus.LATE, {"lab": "b", "rack": "1"}),
    "gb200-02": (HostStatus.UP, {}),
}


def fleet(c: Collector) -> None:
    for name, (_status, labels) in FLEET.items():
        c.add_host(name)
        if labels:
            resp = c.client.patch(f"/api/v1/hosts/{name}", json={"labels": labels}, headers=c.admin)
            assert resp.status_code == 200 and resp.json()["labels"] == labels
    factory = c.client.app.state.sessionmaker  # type: ignore[attr-defined]
    with db.session_scope(factory) as session:
        for name, (status, _labels) in FLEET.items():
            session.execute(update(Host).where(Host.name == name).values(status=status))


def names(c: Collector, **params: Any) -> tuple[list[str], int]:
    resp = c.client.get("/api/v1/hosts", params=params, headers=c.admin)
    assert resp.status_code == 200, resp.text
    return [h["name"] for h in resp.json()], int(resp.headers["X-Total-Count"])


def test_hosts_filter_by_status_name_and_labels(collector: Collector) -> None:
    fleet(collector)
    everyone = sorted(FLEET)
    assert names(collector) == (everyone, 5)  # no filter, no limit: every host, as before
    assert names(collector, status="up") == (["Spark-03", "gb200-02", "spark-01"], 3)
    assert names(collector, status=["lost", "late"]) == (["gb200-01", "spark-02"], 2)
    assert names(collector, name="SPARK") == (["Spark-03", "spark-01", "spark-02"], 3)
    assert names(collector, label="lab=a") == (["spark-01", "spark-02"], 2)
    assert names(collector, label="rack") == (["gb200-01", "spark-01", "spark-02"], 3)
    assert names(collector, label=["lab=b", "rack=1"]) == (["gb200-01"], 1)
    assert names(collector, label="lab=c", status="up") == ([], 0)
    assert names(collector, name="%") == ([], 0)  # a LIKE wildcard is a plain character


def test_hosts_page_through_with_a_total_and_a_next_link(collector: Collector) -> None:
    fleet(collector)
    first = collector.client.get("/api/v1/hosts", params={"limit": 2}, headers=collector.admin)
    assert [h["name"] for h in first.json()] == sorted(FLEET)[:2]
    assert first.headers["X-Total-Count"] == "5"
    following = first.headers["Link"].split(";")[0].strip("<>")
    second = collector.client.get(following, headers=collector.admin)
    assert [h["name"] for h in second.json()] == sorted(FLEET)[2:4]
    assert names(collector, limit=2, offset=4) == (sorted(FLEET)[4:], 5)
    last = collector.client.get("/api/v1/hosts?limit=2&offset=4", headers=collector.admin)
    assert "Link" not in last.headers
    assert names(collector, limit=1, offset=9) == ([], 5)


def test_bad_filters_and_labels_are_refused_not_failed(collector: Collector) -> None:
    fleet(collector)
    get = collector.client.get
    assert get("/api/v1/hosts?limit=0", headers=collector.admin).status_code == 400
    assert get("/api/v1/hosts?offset=-1", headers=collector.admin).status_code == 400
    assert get("/api/v1/hosts?status=asleep", headers=collector.admin).status_code == 400
    assert get("/api/v1/hosts?label=%3Dx", headers=collector.admin).status_code == 400
    assert get("/api/v1/hosts?name=a%00b", headers=collector.admin).status_code == 400
    patch = collector.client.patch
    for labels in ({"": "x"}, {"a b": "x"}, {"k": "x" * 200}, {"k": "tab\there"}):
        resp = patch("/api/v1/hosts/spark-01", json={"labels": labels}, headers=collector.admin)
        assert resp.status_code == 422, labels
    many = {f"k{i}": "v" for i in range(31)}
    resp = patch("/api/v1/hosts/spark-01", json={"labels": many}, headers=collector.admin)
    assert resp.status_code == 400  # 31 more on top of its 2: past 32
    assert names(collector, label="lab=a")[1] == 2  # unchanged


def test_patch_changes_and_removes_labels_and_the_host_shows_them(collector: Collector) -> None:
    fleet(collector)
    changes = {"lab": "c", "rack": None, "owner": "infra/gpu"}
    resp = collector.client.patch(
        "/api/v1/hosts/spark-01", json={"labels": changes}, headers=collector.admin
    )
    assert resp.json()["labels"] == {"lab": "c", "owner": "infra/gpu"}
    assert collector.read("/api/v1/hosts/spark-01")["labels"] == {"lab": "c", "owner": "infra/gpu"}
    assert names(collector, label="owner=infra/gpu") == (["spark-01"], 1)


def test_add_host_labels_a_host(db_url: str) -> None:
    assert main(["--db", db_url, "add-host", "spark-09", "--label", "lab=a", "--label", "x=1"]) == 0
    assert main(["--db", db_url, "add-host", "spark-09", "--update", "--label", "x="]) == 0
    assert main(["--db", db_url, "add-host", "spark-10", "--label", "no-value"]) == 1
    engine = db.make_engine(db_url)
    with db.read_scope(db.make_sessionmaker(engine)) as session:
        assert registry.get_host(session, name="spark-09").labels == {"lab": "a"}
    engine.dispose()


def test_the_hosts_page_filters_and_pages(sqlite_collector: Collector) -> None:
    c = sqlite_collector
    fleet(c)
    for i in range(55):
        c.add_host(f"zz-{i:02d}")
    html = {"Accept": "text/html", "Authorization": f"Bearer {ADMIN_TOKEN}"}
    page = c.client.get("/", params={"label": "lab=a"}, headers=html).text
    assert "spark-01" in page and "spark-02" in page and "Spark-03" not in page
    assert "Hosts 1–2 of 2" in page and 'rel="next"' not in page
    first = c.client.get("/", headers=html).text
    assert "Hosts 1–50 of 60" in first and 'rel="next"' in first
    second = c.client.get("/", params={"page": 2}, headers=html).text
    assert "Hosts 51–60 of 60" in second and "zz-54" in second and "gb200-01" not in second
    form = {"name": "", "status": "", "label": "lab=b"}  # the form sends every field
    assert "Hosts 1–2 of 2" in c.client.get("/", params=form, headers=html).text
    assert c.client.get("/", params={"label": "=a"}, headers=html).status_code == 400
    assert c.client.get("/", params={"status": "asleep"}, headers=html).status_code == 400
