"""Statements for the hot path of ingest: compiled once per dialect, run on the driver's cursor.

SQLAlchemy's execution of even a cached statement (cache key, execution context, result
object) cost more CPU than SQLite took to run a heartbeat's two statements.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from sqlalchemy import Executable
from sqlalchemy.orm import Session

T = TypeVar("T")


class Prepared:
    """A Core statement compiled once per dialect, run on the driver's cursor: per call no
    statement is built, no cache key computed, no execution context or result object made
    (the hot path of ingest; ``copy_rows`` goes to the driver the same way). Bind values and
    a query's result values go through their types' processors as SQLAlchemy's would."""

    def __init__(self, statement: Executable) -> None:
        self._statement = statement
        self._forms: dict[str, _Form] = {}
        self._results: dict[str, tuple[Callable[[Any], Any] | None, ...]] = {}

    def _form(self, dialect: Any) -> _Form:
        form = self._forms.get(dialect.name)
        if form is None:
            compiled = cast(Any, self._statement).compile(dialect=dialect)
            # An expanding IN takes its list at execution: write it as ORs of equalities.
            assert "POSTCOMPILE" not in str(compiled), "no IN (...) in a prepared statement"
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

    def _result_processors(self, dialect: Any, cursor: Any) -> tuple[Any, ...]:
        """Per column of a query, as SQLAlchemy picks them: by type and the driver's type code."""
        found = self._results.get(dialect.name)
        if found is None:
            columns = cast(Any, self._statement).selected_columns
            found = self._results[dialect.name] = tuple(
                c.type.dialect_impl(dialect).result_processor(dialect, d[1])
                for c, d in zip(columns, cursor.description, strict=True)
            )
        return found

    def _run(self, session: Session, params: dict[str, Any]) -> tuple[Any, Any]:
        conn = session.connection()
        form = self._form(conn.dialect)
        values = {**form.defaults, **params}
        for name, process in form.processors.items():
            values[name] = process(values[name])
        args = values if form.order is None else tuple(values[n] for n in form.order)
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        cursor.execute(form.sql, args)
        return cursor, conn.dialect

    def first(self, session: Session, **params: Any) -> tuple[Any, ...] | None:
        """The first row of a query."""
        cursor, dialect = self._run(session, params)
        try:
            row = cursor.fetchone()
            processors = self._result_processors(dialect, cursor)
        finally:
            cursor.close()
        if row is None:
            return None
        return tuple(v if p is None else p(v) for v, p in zip(row, processors, strict=True))

    def rowcount(self, session: Session, **params: Any) -> int:
        """How many rows a DML statement matched."""
        cursor, _dialect = self._run(session, params)
        count = int(cursor.rowcount)
        cursor.close()
        return count


@dataclass(frozen=True)
class _Form:
    sql: str
    order: tuple[str, ...] | None  # positional driver (SQLite): the names in order
    defaults: dict[str, Any]  # values written into the statement
    processors: dict[str, Callable[[Any], Any]]


class PerDialect(Generic[T]):
    """What ``build`` makes for the session's dialect, made once per dialect: an upsert is each
    dialect's own construct, and building one per call (its ``excluded`` alias, its cache key)
    cost more CPU than running it. ``build`` binds its values (``bindparam``), fixes none."""

    def __init__(self, build: Callable[[Session], T]) -> None:
        self._build = build
        self._built: dict[str, T] = {}

    def __call__(self, session: Session) -> T:
        name = session.get_bind().dialect.name
        built = self._built.get(name)
        if built is None:
            built = self._built[name] = self._build(session)
        return built
