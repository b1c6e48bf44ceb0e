"""The spool's on-disk record, a framed batch; a run of them thinned by drop priority, or
merged into one batch for replay.

A frame is ``b"FWS1" | u32 length | u32 crc32(payload) | payload`` (big endian), payload = the
batch as compact JSON. Thinning level 1 drops every other sample, level 2 all samples and
events; kernel and log lines are never thinned (only whole segments go, last).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

MAGIC = b"FWS1"
HEADER = struct.Struct(">4sII")
DROP_KEYS = ("samples", "lines", "events")


def frame(payload: bytes) -> bytes:
    return HEADER.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload


def encode_frame(batch: dict[str, Any]) -> bytes:
    return frame(json.dumps(batch, separators=(",", ":")).encode())


def load(payload: bytes) -> dict[str, Any]:
    """The batch in a payload; {} for a crc-valid frame that is not one."""
    try:
        batch = json.loads(payload)
    except ValueError:
        return {}
    return batch if isinstance(batch, dict) else {}


def count(batch: dict[str, Any]) -> dict[str, int]:
    return {key: len(batch.get(key, ())) for key in DROP_KEYS}


def count_all(payloads: list[bytes]) -> dict[str, int]:
    total = dict.fromkeys(DROP_KEYS, 0)
    for payload in payloads:
        for key, n in count(load(payload)).items():
            total[key] += n
    return total


def max_kseqs(batch: dict[str, Any]) -> dict[str, int]:
    """{boot_id: the highest kernel seq among its lines} (resume hint), {} if none."""
    try:
        kseqs = [ln["kseq"] for ln in batch.get("lines", ()) if ln.get("kseq") is not None]
    except (TypeError, KeyError, AttributeError):
        return {}
    return {str(batch.get("boot_id", "")): max(kseqs)} if kseqs else {}


def iter_frames(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    """(start, end, payload) of every valid frame; garbage between frames is skipped."""
    pos = 0
    while pos < len(data):
        if data.startswith(MAGIC, pos) and pos + HEADER.size <= len(data):
            _, length, crc = HEADER.unpack_from(data, pos)
            end = pos + HEADER.size + length
            payload = data[pos + HEADER.size : end]
            if end <= len(data) and zlib.crc32(payload) == crc:
                yield pos, end, payload
                pos = end
                continue
        nxt = data.find(MAGIC, pos + 1)
        if nxt < 0:
            return
        pos = nxt


def coalesce(
    payloads: Iterable[bytes], max_records: int, max_bytes: int
) -> tuple[dict[str, Any] | None, int, int]:
    """The leading payloads of one boot merged into one batch within the limits (the first is
    taken whatever its size): (the batch, None if none was one; frames taken; their bytes)."""
    merged: dict[str, Any] | None = None
    frames = records = size = 0
    for payload in payloads:
        batch = load(payload)
        n = sum(count(batch).values())
        if merged is not None and (
            batch.get("boot_id") != merged.get("boot_id")
            or records + n > max_records
            or size + HEADER.size + len(payload) > max_bytes
        ):
            break
        frames, records = frames + 1, records + n
        size += HEADER.size + len(payload)
        if merged is None:
            merged = batch or None  # a frame that is not a batch: skipped
        else:
            for key in DROP_KEYS:
                merged.setdefault(key, []).extend(batch.get(key, ()))
    return merged, frames, size


def thin(payloads: list[bytes], level: int) -> tuple[list[bytes], dict[str, int]]:
    """(frames, counts dropped) of ``payloads`` thinned to ``level``. A frame that loses
    nothing keeps its bytes, and none grows: frame i never ends past where it ended before."""
    keep_sample = True
    frames: list[bytes] = []
    lost = dict.fromkeys(DROP_KEYS, 0)
    for payload in payloads:
        batch = load(payload)
        samples = batch.get("samples", [])
        kept = []
        if level == 1:
            for sample in samples:
                if keep_sample:
                    kept.append(sample)
                keep_sample = not keep_sample
        events = batch.get("events", []) if level >= 2 else []
        if len(kept) == len(samples) and not events:
            frames.append(frame(payload))
            continue
        lost["samples"] += len(samples) - len(kept)
        lost["events"] += len(events)
        batch["samples"] = kept
        if level >= 2:
            batch["events"] = []
        if kept or batch.get("lines") or batch.get("events"):
            frames.append(encode_frame(batch))
    return frames, lost
