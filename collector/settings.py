"""The collector's one settings object (``FREEZEWATCH_*`` environment variables)."""

from __future__ import annotations

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent.wire import MAX_RETRY_DELAY_S


class PostmortemCommand(BaseModel):
    """One evidence command run on the host after a reboot."""

    name: str = Field(min_length=1)
    argv: list[str] = Field(min_length=1)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FREEZEWATCH_", extra="ignore")

    db_url: str = "sqlite:///./freezewatch.db"
    bind: str = "127.0.0.1"
    port: int = 8080
    admin_token: str | None = None
    # Where links in alerts point; defaults to http://<bind>:<port>. Also the origin the UI's
    # state changes may come from (behind a proxy), and https here makes the cookie Secure.
    public_url: str | None = None
    grace_s: float = Field(3.0, gt=0)
    max_body_bytes: int = 16 * 1024 * 1024
    # Batches stored at once; more wait for a slot (SQLite has one writer anyway).
    ingest_concurrency: int = Field(4, ge=1)
    # Collector processes on the one port (`serve --workers`, PostgreSQL only): each a replica
    # (collector.workers), so a burst's Python work is not confined to one interpreter.
    workers: int = Field(1, ge=1)
    # The scheduler (heartbeat checks, alert delivery) runs in `serve`; tests turn it off and
    # call the job steps directly.
    run_scheduler: bool = True
    webhook_urls: str = ""
    # Bearer token Prometheus must present at /metrics; unset: /metrics is open (as /healthz).
    metrics_token: str | None = None
    # UDP listener for kernel netconsole, e.g. "0.0.0.0:6666"; off when unset.
    netconsole_bind: str | None = None
    # Raw datagrams are evidence for re-parsing a burst; pruned after this many days.
    netconsole_keep_days: float = Field(7.0, gt=0)
    netconsole_fragment_timeout_s: float = Field(2.0, gt=0)
    # Matrix runs keep their per-request JSONL records under here.
    data_dir: str = "./freezewatch-data"
    # How long a finished matrix run waits for the agent's last batches before its report.
    matrix_settle_s: float = Field(5.0, ge=0)
    # A collector drives a matrix run under a lease renewed while it runs; a run whose lease
    # expired (its collector was killed) is taken over by another collector process.
    matrix_lease_s: float = Field(30.0, gt=0)
    # vLLM counts as hung when requests run and no token was generated for this long.
    vllm_hang_s: float = Field(15.0, gt=0)

    # Freeze detection (issue 3).
    # Fine ticks: each one can move the incident's opening (and its alert) by this much.
    check_interval_s: float = Field(0.25, gt=0)
    probe_deadline_s: float = Field(2.0, gt=0)
    # Probes start this long before grace ends (at most half the grace), so the incident opens
    # at grace instead of grace + probe deadline; see collector.liveness.heartbeat.
    probe_lead_s: float = Field(1.0, ge=0)
    # A "late" claim older than this is re-taken (its checker died mid-probe).
    late_reclaim_s: float = Field(30.0, gt=0)
    alive_tick_s: float = Field(2.0, gt=0)
    # Replicas on one PostgreSQL: how often each tries to become (or checks it still is) the
    # one running the singleton jobs; a dead leader's successor starts within about this long.
    leader_check_s: float = Field(1.0, gt=0)
    # The agents' longest wait between two tries while the collector is unreachable: after a
    # collector start each host gets this plus its grace to reconnect (the startup grace).
    agent_retry_max_s: float = Field(MAX_RETRY_DELAY_S, ge=0)
    # An incident whose silence began while the collector was down alerts only if the host is
    # still silent this long after the collector started (else it resolves without a word).
    restart_alert_hold_s: float = Field(30.0, ge=0)
    # After a host returns on the same boot, how long the spool replay may take to close the gap
    # (agents that report their backlog: decided once it is drained, or after the longest wait).
    resolve_settle_s: float = Field(5.0, ge=0)
    resolve_backlog_max_s: float = Field(300.0, gt=0)
    # A hole in the agent's own samples longer than this is a stall.
    stall_min_s: float = Field(3.0, gt=0)
    snapshot_window_s: float = Field(120.0, gt=0)

    # Alerts.
    delivery_interval_s: float = Field(1.0, gt=0)
    webhook_timeout_s: float = Field(10.0, gt=0)
    webhook_retry_window_s: float = Field(24 * 3600.0, gt=0)
    webhook_backoff_base_s: float = Field(2.0, gt=0)
    webhook_backoff_max_s: float = Field(3600.0, gt=0)
    kernel_alert_cooldown_s: float = Field(60.0, ge=0)
    # A fatal kernel fault back after this many reboots: inspect the hardware.
    kernel_escalate_after_reboots: int = Field(2, ge=1)

    # Post-mortem over SSH after a reboot.
    postmortem_interval_s: float = Field(2.0, gt=0)
    # JSON list of {"name": ..., "argv": [...]}; empty means the built-in defaults.
    postmortem_commands: list[PostmortemCommand] = Field(default_factory=list)
    postmortem_nvidia_bug_report: bool = False
    postmortem_timeout_s: float = Field(120.0, gt=0)
    postmortem_max_bytes: int = Field(4 * 1024 * 1024, gt=0)
    postmortem_attempts: int = Field(6, ge=1)
    postmortem_retry_s: float = Field(10.0, gt=0)
    pstore_dir: str = "/sys/fs/pstore"

    # Retention (issue 19): days each kind of data is kept (0: kept until deleted); a host's own
    # ``retention`` overrides these. Kernel lines at priority <= 3 (err and worse) outlive the
    # other lines; matrix runs are kept until deleted.
    retain_samples_days: float = Field(30.0, ge=0)
    retain_rollups_days: float = Field(365.0, ge=0)
    retain_lines_days: float = Field(90.0, ge=0)
    retain_kernel_lines_days: float = Field(365.0, ge=0)
    retain_kernel_events_days: float = Field(365.0, ge=0)
    retain_events_days: float = Field(90.0, ge=0)
    retain_incidents_days: float = Field(0.0, ge=0)
    # The pruning job: how often, how many rows one short transaction deletes, and how many
    # such batches one run may take (the rest waits for the next run).
    retention_interval_s: float = Field(300.0, gt=0)
    retention_batch_rows: int = Field(2000, ge=1)
    retention_max_batches: int = Field(500, ge=1)
    # Per-host disk use (rows and bytes per kind) is re-measured this often.
    storage_measure_s: float = Field(3600.0, gt=0)

    @property
    def base_url(self) -> str:
        return self.public_url or f"http://{self.bind}:{self.port}"
