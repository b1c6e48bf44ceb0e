"""The agent → collector wire format: the one place both sides take their constants from.

A batch is one JSON object (optionally gzip-encoded) POSTed to ``INGEST_PATH`` with
``Authorization: Bearer <host token>``::

    {
      "host": "spark-01",
      "boot_id": "0b3c…",                      # /proc/sys/kernel/random/boot_id
      "agent": {"version": "0.1.0", "pid": 812, "started_at": 1764400000.0,
                "boot_id": "0b3c…",            # the SENDER's current boot (see below)
                "sent_at": 1764400001.3},      # the sender's wall clock at this POST
      "backlog": {"bytes": 0},                 # spool still held after this batch
      "samples": [{"seq": 1, "ts": 1764400001.0, "burst": false,
                   "mem": {...}, "psi": {...}, "vmstat": {...}, "load": {...},
                   "gpu": {...} | null, "vllm": {...} | null}],
      "lines":   [{"seq": 7, "ts": 1764400001.2, "source": "kmsg", "priority": 3,
                   "facility": 0, "kseq": 1042, "text": "NVRM: ...", "fields": {...}}],
      "events":  [{"seq": 3, "ts": 1764400001.0, "kind": "kmsg_overrun", "data": {"lost": 12}}]
    }

``boot_id`` says which boot the records belong to; ``agent.boot_id`` is the boot the sending
agent runs in. They differ for a spooled batch replayed after a reboot and for the previous
boot's catch-up (its journal tail and pstore files): those are evidence about the old boot,
while the heartbeat they carry is the new boot's.

``ts`` values are the agent's wall clock in epoch seconds. Each stream (samples, lines,
events) has its own ``seq`` counter, monotonic per (host, boot_id) across agent restarts.
Kernel lines also carry the kernel's own record number as ``kseq``; the collector keeps one
row per (boot, kseq), so a re-read kernel record never duplicates whatever its ``seq``.

Sample sections (all optional except ``mem``; units are fixed so the collector never guesses):

- ``mem``: /proc/meminfo fields by their kernel names, in bytes (``MemAvailable``, ...).
- ``psi``: ``{"memory"|"cpu"|"io": {"some"|"full": {"avg10", "avg60", "avg300", "total"}}}``.
- ``vmstat``: per-second rates of ``pgmajfault``, ``pswpin``, ``pswpout``, ``oom_kill``,
  ``allocstall``, ``compact_stall`` since the previous sample.
- ``load``: ``{"1", "5", "15", "running", "total"}`` from /proc/loadavg.
- ``gpu``: ``{"index", "pci", "name", "util", "mem_used", "mem_total", "temp_c", "power_w",
  "clocks": {"sm", "mem", "graphics"}, "unsupported": [...]}`` of the first device (``util``
  %, bytes, MHz), plus ``"devices": [...]`` (same keys each) when there are several; a value
  the device does not report (GB10 unified memory) is null and named in ``unsupported``.
- ``vllm``: list of ``{"url", "health", "health_ms", "error", "running", "waiting", "kv_usage",
  "preemptions", "prompt_tokens", "generation_tokens", "iteration_tokens", "spec_accepted",
  "spec_draft"}``; counts summed over data-parallel engines, ``kv_usage`` the busiest engine's;
  ``health`` is the /health HTTP status or null when nothing answered, ``error`` says why.
- ``containers``: list of ``{"id", "name", "image", "state", "restart_count", "oom_killed",
  "exit_code", "started_at", "mem_used", "mem_limit"}`` (bytes; memory refreshed every few
  ticks) for the Docker containers chosen by label or name.

``burst`` is true for samples taken while burst mode is on (a vLLM load phase or a GPU-fault
kernel line started it): then samples come at 10 Hz, and those between the regular ticks
carry only ``mem`` and ``psi``.

Lines: ``source`` is ``kmsg`` for kernel records (``kseq`` set when read from /dev/kmsg;
records caught up from the previous boot's journal have none, but ``fields`` keep
``_SOURCE_MONOTONIC_TIMESTAMP`` and ``via: "journal"``), ``vllm`` for vLLM's log (Docker
log stream with ``fields {"container", "stream"}``, a followed file ``{"file"}``, or a
unit's journal ``{"unit", "pid", "identifier"}``), ``journal`` for NVML Xid events and for
pstore files (``fields {"pstore_file", "pstore_dir", "line_no"}``). A batch may carry an
earlier ``boot_id`` than the agent's current one: the catch-up of the previous boot
(``agent.catchup``) and spooled batches replayed after a reboot. ``agent`` always describes
the agent sending the batch now (replayed batches are re-stamped), and ``agent.boot_id`` is
the boot it runs in: the collector counts the batch as a heartbeat of that boot (a catch-up
of the old boot is not the old boot coming back). Older agents omit it; then ``boot_id``.

Events: ``agent_started`` data ``{"previous_boot_id", "guard": {"state": armed|dry_run|off|
error, "rules": [text], "actions": [text], "cooldown_s", "phases", "source", "crc32",
"error"?}}`` says what the host's guard (``agent.guard``) is; ``guard_fired`` is sent the
moment a rule trips (also in dry-run, with ``dry_run: true``), ``guard_result`` when its
actions ended, joined by ``fire_id``.

``agent.sent_at`` (the agent's wall clock when it sent this POST, also on replayed batches)
lets the collector measure the agent's clock offset; ``backlog.bytes`` is how much the agent's
spool still holds after this batch (0: this batch is live, or the last of a replay). Both are
optional (older agents omit them): without ``backlog`` the collector cannot tell a replay in
progress from a finished one.

The collector answers 200 with ``{"stored": {stream: n}, "duplicates": {stream: n},
"resume": {"kseq": <highest kernel seq the agent stored for this boot> | null}}``; ``resume``
is answered to a batch carrying ``agent_started`` (null for every other batch).
"""

from __future__ import annotations

WIRE_VERSION = 1
INGEST_PATH = "/api/v1/ingest"

STREAMS = ("samples", "lines", "events")
LINE_SOURCES = ("kmsg", "journal", "vllm", "netconsole")

# Agent-side facts shipped as events.
EVENT_KINDS = (
    "agent_started",
    "agent_stopping",  # SIGTERM: data {"shutdown": bool} says whether the system is going down
    # Cumulative drop ledger: data {"ledger": id, "samples": n, "lines": n, "events": n (totals
    # since the ledger began), "first_ts", "last_ts" (the drops new since the last report),
    # "reasons": [...]}. Older agents sent per-drop counts without "ledger".
    "spool_dropped",
    "kmsg_overrun",  # data {"lost": n}
    "source_error",  # data {"source": name, "error": text}
    "source_info",  # data {"source": name, "info": text}: e.g. "GPU source off: no NVML"
    # Records the collector refused for good, set aside in the state dir's dead-letter.jsonl:
    # data {"samples": n, "lines": n, "events": n, "why": text, "file": path or null}
    "dead_lettered",
    # The guard (agent.guard): a rule tripped, sent at once; its actions' outcome follows.
    # guard_fired data {"fire_id", "rule", "values", "phase", "dry_run", "actions", "tripped_at"}
    "guard_fired",
    "guard_result",  # data {"fire_id", "rule", "results": [{"action", "ok", "detail", "ms"}]}
)

# What the guard is (``agent_started`` data ``guard``: {"state", "rules", "actions", ...}).
GUARD_STATES = ("armed", "dry_run", "off", "error")

# Kernel event kinds, as the collector's classifier names them (agent.kernel.classify) and
# the guard's ``kernel_event`` rules match them on the host.
KERNEL_EVENT_KINDS = (
    "xid",
    "sxid",
    "nv_err",
    "gsp",
    "uvm",
    "bus_off",
    "aer",
    "iommu",
    "oops",
    "soft_lockup",
    "hung_task",
    "rcu_stall",
    "oom_kill",
    "alloc_failure",
)
VLLM_PHASES = (
    "starting",
    "loading_weights",
    "loading_drafter",
    "profiling",
    "capturing_cuda_graphs",
    "serving",
    "stopped",
    "failed",
    "crashed",
)

MAX_LINE_BYTES = 16 * 1024  # longer lines are truncated by the collector, flagged, not dropped
MAX_BATCH_BYTES = 16 * 1024 * 1024  # decompressed body limit; over it the collector answers 413
MAX_BATCH_RECORDS = 20_000  # records of all streams in one batch
# The agent's longest wait between retries while the collector is unreachable (it retries
# every interval while the collector's port refuses, i.e. the collector is restarting). The
# collector's startup grace is built from it: a restart must not declare a host late before
# its agent had the chance to reconnect.
MAX_RETRY_DELAY_S = 5.0
