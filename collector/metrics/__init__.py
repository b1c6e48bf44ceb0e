"""The Prometheus exporter: what ``/metrics`` says, built with ``prometheus_client``.

Per-host figures are read from the database at scrape time (liveness, the latest sample, counts
of incidents and kernel events), so every collector process answers the same and a restart
loses nothing; ingest request figures are this process's own. Labels are bounded: host names,
fixed enums, device indexes and a capped set of fault codes; never line text or boot ids.
Reads the domains below it; nothing imports it but ``deps`` and the API.
"""
