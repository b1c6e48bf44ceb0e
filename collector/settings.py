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
    netconsole_bind: str | None = None
    session_secret: str | None = None
    # vLLM counts as hung when requests run and no token was generated for this long.
    vllm_hang_s: float = Field(15.0, gt=0)

    @property
    def base_url(self) -> str:
        return self.public_url or f"http://{self.bind}:{self.port}"
