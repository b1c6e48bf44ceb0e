"""Which log lines a reader skips: vLLM's access log for polled endpoints and ordinary answers,
and the agent's canary lines (the pages' logs.js tells them apart with the same patterns)."""

from __future__ import annotations

from sqlalchemy import and_, or_
from sqlalchemy.sql.expression import ColumnElement

from agent.canary import CANARY_PREFIX
from collector.models import KERNEL_SOURCES, Line

# vLLM endpoints that are polled (the agent, load balancers): noise whatever they answer.
POLLED = ("/health", "/metrics", "/v1/models", "/ping")


def noise() -> ColumnElement[bool]:
    """Lines a reader skips: vLLM's access log (uvicorn's ``... - "GET /health HTTP/1.1" 200
    OK``, from its log or a unit's journal) for polled endpoints and for any answer below 5xx,
    and the agent's canary lines. The pages' logs.js tells them apart with the same patterns."""
    answers = [Line.text.like(f'%"% HTTP/%" {digit}__%') for digit in "1234"]
    polled = [Line.text.like(f'%"GET {path} HTTP/%" ___%') for path in POLLED]
    access = or_(*answers, *polled)
    return or_(
        and_(Line.source.not_in(KERNEL_SOURCES), access),
        Line.text.like(f"%{CANARY_PREFIX} %"),
    )
