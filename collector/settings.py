"""The collector's one settings object (``FREEZEWATCH_*`` environment variables)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FREEZEWATCH_", extra="ignore")

    db_url: str = "sqlite:///./freezewatch.db"
    bind: str = "127.0.0.1"
    port: int = 8080
    admin_token: str | None = None
    # Where links in alerts point; defaults to http://<bind>:<port>.
    public_url: str | None = None
    grace_s: float = Field(3.0, gt=0)
    max_body_bytes: int = 16 * 1024 * 1024
    # The scheduler (heartbeat checks, alert delivery) runs in `serve`; tests turn it off and
    # call the job steps directly.
    run_scheduler: bool = True
    webhook_urls: str = ""
    # UDP listener for kernel netconsole, e.g. "0.0.0.0:6666"; off when unset.
    netconsole_bind: str | None = None
    # Raw datagrams are evidence for re-parsing a burst; pruned after this many days.
    netconsole_keep_days: float = Field(7.0, gt=0)
    netconsole_fragment_timeout_s: float = Field(2.0, gt=0)
    session_secret: str | None = None
    # Matrix runs keep their per-request JSONL records under here.
    data_dir: str = "./freezewatch-data"
    # How long a finished matrix run waits for the agent's last batches before its report.
    matrix_settle_s: float = Field(5.0, ge=0)
    # vLLM counts as hung when requests run and no token was generated for this long.
    vllm_hang_s: float = Field(15.0, gt=0)

    @property
    def base_url(self) -> str:
        return self.public_url or f"http://{self.bind}:{self.port}"
