"""Packing a batch's samples (``collector.packing``): each against its host's template of the
sample's shape for the day, found in the process's cache, else in the database, else made from
the sample.

A template becomes visible to other batches of this process once its transaction commits (a
rolled-back one is forgotten with its row); another collector that made the same one first
wins the unique (host, digest) and both use its row. A host whose shape keeps changing gets
at most ``NEW_PER_DAY`` new templates a day; past that its samples are stored plain.
"""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import event, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from collector import db
from collector.models import (
    SampleTemplate,
    engine_of,
    remember_template,
    table_of,
    template_of,
)
from collector.packing import Skeleton, Template, flatten, pack, pack_plain, shape_digest

NEW_PER_DAY = 32
DAY_S = 86400.0

# Per database, (host id, day, shape tokens) -> (template id, template): committed ones only
Key = tuple[int, int, Skeleton]
_CHOSEN: WeakKeyDictionary[Engine, dict[Key, tuple[int, Template]]] = WeakKeyDictionary()
# Per database, (host id, day) -> the template its last committed batch used
_LATEST: WeakKeyDictionary[Engine, dict[tuple[int, int], tuple[int, Template]]]
_LATEST = WeakKeyDictionary()
_CHOSEN_KEPT = 4096
_PENDING = "freezewatch.sample_templates"  # Session.info: this transaction's new ones


class SamplePacker:
    """Packs one batch's samples for ``host_id`` inside the batch's transaction."""

    def __init__(self, session: Session, *, host_id: int, received_at: float) -> None:
        self.session = session
        self.host_id = host_id
        self.received_at = received_at
        self.day = int(received_at // DAY_S)
        self.chosen = _CHOSEN.get(engine_of(session), {})
        self.latest = _LATEST.get(engine_of(session), {}).get((host_id, self.day))
        self.last: tuple[int, Template] | None = None

    def pack(self, data: dict[str, Any], known: dict[str, Any], *, burst: bool) -> bytes:
        """One sample's ``data`` packed (plain past the day's templates); ``known``: its typed
        columns."""
        for chosen in (self.last, self.latest):  # most samples have the shape of the last
            values = chosen[1].values_of(data) if chosen else None
            if chosen and values is not None:
                self.last = chosen
                return pack(values, chosen[1], template_id=chosen[0], known=known, burst=burst)
        tokens, values = flatten(data)
        key = (self.host_id, self.day, tokens)
        chosen = self.chosen.get(key) or self._pending().get(key) or self._find_or_make(key, data)
        if chosen is None:
            return pack_plain(data, burst=burst)
        self.last = chosen
        template_id, template = chosen
        return pack(values, template, template_id=template_id, known=known, burst=burst)

    def _pending(self) -> dict[Key, tuple[int, Template]]:
        """This transaction's new templates; shared once it commits, dropped if it rolls back."""
        pending: dict[Key, tuple[int, Template]] | None
        pending = self.session.info.setdefault(_PENDING, {})
        return pending

    def _find_or_make(self, key: Key, data: dict[str, Any]) -> tuple[int, Template] | None:
        digest = shape_digest(key[2], self.day)
        template_id = self._stored(digest)
        if template_id is not None:  # committed (ours would be pending): safe to cache
            chosen = (template_id, template_of(self.session, template_id))
        elif self._made_today() >= NEW_PER_DAY:
            return None
        else:
            template = Template(data)
            row = {"host_id": self.host_id, "digest": digest, "body": template.body(),
                   "created_at": self.received_at}  # fmt: skip
            insert = db.insert(self.session, table_of(SampleTemplate)).values(row)
            made = db.changed_rows(self.session, insert.on_conflict_do_nothing())
            template_id = self._stored(digest)
            if template_id is None:  # pragma: no cover - written or found just now
                return None
            # Another collector's, committed while we waited on its key: that one is used.
            chosen = (template_id, template if made else template_of(self.session, template_id))
        self._pending()[key] = chosen
        return chosen

    def _stored(self, digest: str) -> int | None:
        return self.session.scalar(
            select(SampleTemplate.id).where(
                SampleTemplate.host_id == self.host_id, SampleTemplate.digest == digest
            )
        )

    def _made_today(self) -> int:
        count = self.session.scalar(
            select(func.count()).where(
                SampleTemplate.host_id == self.host_id,
                SampleTemplate.created_at > self.received_at - DAY_S,
            )
        )
        return int(count or 0)


@event.listens_for(Session, "after_commit")
def _share(session: Session) -> None:
    """The transaction committed: its templates are now every batch's."""
    pending = session.info.pop(_PENDING, None)
    if not pending:
        return
    chosen = _CHOSEN.setdefault(engine_of(session), {})
    latest = _LATEST.setdefault(engine_of(session), {})
    if len(chosen) + len(pending) > _CHOSEN_KEPT:
        chosen.clear()
        latest.clear()
    for key, (template_id, template) in pending.items():
        chosen[key] = latest[key[:2]] = (template_id, template)
        remember_template(session, template_id, template)


@event.listens_for(Session, "after_rollback")
def _forget(session: Session) -> None:
    """Rolled back: the rows are gone, and their ids may be handed out again."""
    session.info.pop(_PENDING, None)
