"""How long one 1,000-line batch takes to be stored and answered, one client, no contention.

A real collector process per checkout on one database server (``--db postgres``: a throwaway
PostgreSQL cluster, a database each; ``sqlite``: a file each), this process as the client
over one kept-alive connection (the agent's HTTP client). With ``--vs DIR`` the other
checkout's collector runs beside this one and the two are posted to in turn, ``--per-round``
batches each, for ``--rounds`` rounds (first one, then the other, first): a before/after of a
few percent that holds on a noisy machine, where ``bench/ingest.py``'s throughput moves by a
fifth or more from run to run.

    python bench/batch_latency.py [--db postgres|sqlite] [--vs /tmp/fw-base]

Prints median, p25 and p75 per checkout; the last line is JSON with ``median_ms`` (and, with
``--vs``, ``baseline_median_ms`` and ``ratio``: this checkout ÷ the other).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import ROOT, add_host, free_port, start_collector
from bench.ingest import connect, make_bodies, post

WARMUP = 20


class Side:
    """One checkout's collector, its host's token and the batches still to post to it."""

    def __init__(self, root: Path, db_url: str, client: int, count: int, logdir: Path) -> None:
        self.token = add_host(db_url, "bench")
        port = free_port()
        self.proc = start_collector(db_url, port, logdir / f"collector-{client}.log", root=root)
        self.conn = connect(f"http://127.0.0.1:{port}")
        self.bodies: Iterator[bytes] = iter(make_bodies("lines", client, count))
        self.ms: list[float] = []

    def post(self, *, record: bool = True) -> None:
        started = time.perf_counter()
        post(self.conn, self.token, next(self.bodies))
        if record:
            self.ms.append(1000.0 * (time.perf_counter() - started))

    def close(self) -> None:
        self.conn.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)


def database_urls(kind: str, tmp: Path, names: list[str], stack: ExitStack) -> list[str]:
    """A fresh database per checkout: SQLite files, or databases of one throwaway cluster."""
    if kind == "sqlite":
        return [f"sqlite:///{tmp / name}.db" for name in names]
    from tests.support.postgres import ThrowawayPostgres, fresh_database

    pg = stack.enter_context(ThrowawayPostgres())
    return [fresh_database(pg.admin_url, name) for name in names]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--vs", type=Path, help="another checkout, measured in turn with this one")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--per-round", type=int, default=40)
    args = parser.parse_args()
    roots = {"this": ROOT} | ({"baseline": args.vs.resolve()} if args.vs else {})
    count = WARMUP + args.rounds * args.per_round
    sides: dict[str, Side] = {}
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fw-latency-")))
        urls = database_urls(args.db, tmp, list(roots), stack)
        for client, ((name, root), url) in enumerate(zip(roots.items(), urls, strict=True)):
            side = sides[name] = Side(root, url, client, count, tmp)
            stack.callback(side.close)
        for side in sides.values():
            for _ in range(WARMUP):
                side.post(record=False)
        order = list(sides.values())
        for _ in range(args.rounds):
            for side in order:
                for _ in range(args.per_round):
                    side.post()
            order.reverse()  # each goes first in every other round
    figures: dict[str, float] = {}
    for name, side in sides.items():
        p25, median, p75 = statistics.quantiles(side.ms, n=4)
        print(f"{name} ({roots[name]}): median {median:.2f} ms, p25 {p25:.2f}, p75 {p75:.2f}")
        figures["median_ms" if name == "this" else "baseline_median_ms"] = round(median, 3)
    if "baseline_median_ms" in figures:
        figures["ratio"] = round(figures["median_ms"] / figures["baseline_median_ms"], 3)
    print(json.dumps({args.db: figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
