"""Statements for the hot path of ingest: compiled once per dialect, run on the driver's cursor.

SQLAlchemy's execution of even a cached statement (cache key, execution context, result
object) cost more CPU than SQLite took to run a heartbeat's two statements.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Executable
from sqlalchemy.orm import Session


class Prepared:
    """A Core statement compiled once per dialect, run on the driver's cursor: per call no
    statement is built, no cache key computed, no execution context or result object made
    (the hot path of ingest; ``copy_rows`` goes to the driver the same way). Bind values go
    through their types' processors as SQLAlchemy's would; results come back as the driver
    reads them (on SQLite a boolean is 0/1, a datetime text)."""

    def __init__(self, statement: Executable) -> None:
        self._statement = statement
        self._forms: dict[str, _Form] = {}

    def _form(self, dialect: Any) -> _Form:
        form = self._forms.get(dialect.name)
        if form is None:
            compiled = cast(Any, self._statement).compile(dialect=dialect)
            binds = compiled.binds.items()
            form = self._forms[dialect.name] = _Form(
                sql=str(compiled),
                order=tuple(compiled.positiontup) if compiled.positiontup else None,
                defaults={n: b.effective_value for n, b in binds if not b.required},
                processors={
                    n: p
                    for n, b in binds
                    if (p := b.type.dialect_impl(dialect).bind_processor(dialect)) is not None
                },
            )
        return form

    def _run(self, session: Session, params: dict[str, Any]) -> Any:
        conn = session.connection()
        form = self._form(conn.dialect)
        values = {**form.defaults, **params}
        for name, process in form.processors.items():
            values[name] = process(values[name])
        args = values if form.order is None else tuple(values[n] for n in form.order)
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        cursor.execute(form.sql, args)
        return cursor

    def first(self, session: Session, **params: Any) -> tuple[Any, ...] | None:
        """The first row of a query."""
        cursor = self._run(session, params)
        try:
            row = cursor.fetchone()
        finally:
            cursor.close()
        return None if row is None else tuple(row)

    def rowcount(self, session: Session, **params: Any) -> int:
        """How many rows a DML statement matched."""
        cursor = self._run(session, params)
        count = int(cursor.rowcount)
        cursor.close()
        return count


@dataclass(frozen=True)
class _Form:
    sql: str
    order: tuple[str, ...] | None  # positional driver (SQLite): the names in order
    defaults: dict[str, Any]  # values written into the statement
    processors: dict[str, Callable[[Any], Any]]
