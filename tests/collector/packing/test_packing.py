"""A packed sample comes back exactly: the same keys in the same order, the same values of the
same types (JSON text compared), whatever moved, whatever its typed columns hold."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.sources.proc import LoadSource, MemSource, PsiSource
from collector.packing import (
    KNOWN_PATHS,
    PackError,
    Template,
    flatten,
    header,
    pack,
    pack_plain,
    shape_digest,
    unpack,
)
from collector.packing.shape import build, plan

PROC = Path(__file__).resolve().parents[2] / "fixtures" / "proc"
FLOAT_COLUMNS = {
    c for c in KNOWN_PATHS.values() if not c.startswith("mem_") and c != "gpu_mem_used"
}


def text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def host_sample(rng: random.Random, second: int) -> dict[str, Any]:
    """What the agent sends at ``second`` (its /proc fixture, moved the way a busy host moves)."""
    mem = {k: v + rng.randint(-4096, 4096) * 1024 if v else v
           for k, v in MemSource(PROC).read().items()}  # fmt: skip
    psi = PsiSource(PROC).read()
    psi["memory"]["some"] |= {"avg10": round(rng.uniform(0, 60), 2), "total": 10**8 + second}
    return {
        "mem": mem,
        "psi": psi,
        "vmstat": {"pgmajfault": float(rng.choice((0, 12))), "pswpin": None},
        "load": LoadSource(PROC).read() | {"1": round(rng.uniform(0, 9), 2)},
        "gpu": {"index": 0, "util": rng.randint(0, 100), "mem_used": rng.randint(0, 2**36),
                "power_w": rng.randint(5000, 90000) / 1000, "clocks": {"sm": 2418}},
        "vllm": [{"url": "http://127.0.0.1:8000", "health": 200, "running": rng.randint(0, 8),
                  "kv_usage": rng.random(), "error": None, "prompt_tokens": 1000 * second}],
    }  # fmt: skip


def columns(data: dict[str, Any]) -> dict[str, Any]:
    """What the typed columns hold of ``data``, as they read back (floats in Float columns)."""
    tokens, values = flatten(data)
    out: dict[str, Any] = {}
    for path, value in zip(plan(tokens)[1], values, strict=True):
        column = KNOWN_PATHS.get(path)
        if column and isinstance(value, int | float) and not isinstance(value, bool):
            out[column] = float(value) if column in FLOAT_COLUMNS else value
    return out


def round_trip(data: dict[str, Any], template: Template, known: dict[str, Any]) -> bytes:
    packed = pack(flatten(data)[1], template, template_id=3, known=known, burst=True)
    stored = Template.from_body(template.body())  # as another process reads it
    assert text(unpack(packed, stored, known)) == text(data)
    assert header(packed) == (True, 3)
    return packed


def test_a_busy_hosts_samples_come_back_exactly_in_a_fraction_of_their_json() -> None:
    rng = random.Random(5)
    first = host_sample(rng, 0)
    template = Template(first)
    for second in range(1, 50):
        data = host_sample(rng, second)
        packed = round_trip(data, template, columns(data))
        assert len(packed) * 5 < len(text(data))


def test_what_the_typed_columns_hold_is_left_out() -> None:
    rng = random.Random(6)
    template = Template(host_sample(rng, 0))
    data = host_sample(rng, 1)
    with_columns = round_trip(data, template, columns(data))
    without = round_trip(data, template, {})
    assert len(with_columns) < len(without)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("gpu", "util"), 7.5),
        (("gpu", "mem_used"), 2**62 + 1),
        (("gpu", "power_w"), -0.0),
        (("vllm", 0, "running"), 2**62 + 1),
        (("vllm", 0, "kv_usage"), -0.0),
        (("vllm", 0, "health"), None),
        (("vllm", 0, "error"), "connection refused"),
        (("vllm", 0, "prompt_tokens"), -(2**63)),
        (("mem", "MemTotal"), 1.5),
        (("mem", "MemFree"), True),
        (("mem", "Dirty"), 1000),
        (("psi", "memory", "some", "avg10"), 1e-07),
        (("psi", "memory", "some", "total"), 10**18),
        (("load", "1"), 123456.789),
    ],
)
def test_values_the_template_does_not_predict_come_back(path: tuple[Any, ...], value: Any) -> None:
    """A type or scale the template's value does not predict (a float for an int, a null, a
    string, -0.0, 64-bit extremes, bytes that are not whole KiB) comes back as it was; a
    column that cannot hold it exactly (2**62 + 1 in a Float column) does not stand in for it."""
    rng = random.Random(7)
    template = Template(host_sample(rng, 0))
    data = host_sample(rng, 1)
    node = data
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    round_trip(data, template, columns(data))


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([0, 1024, 2**20, 2**30 * 128, -(2**40)]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 0.5, 41.27, 1e16, 2.5e-300, 123.456789]),
    st.text(max_size=6),
)
trees = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    base=st.dictionaries(st.sampled_from(["mem", "psi", "gpu", "vllm", "x"]), trees, max_size=5),
    new=st.lists(scalars, min_size=40, max_size=40),
)
def test_any_json_comes_back(base: dict[str, Any], new: list[Any]) -> None:
    template = Template(base)
    tokens, values = flatten(base)
    data = build(plan(tokens)[0], iter(new[: len(values)] + values[len(new) :]))
    round_trip(data, template, columns(data))
    assert text(unpack(pack_plain(data), None, {})) == text(data)


def test_a_template_is_named_by_shape_nulls_and_day() -> None:
    one, _ = flatten({"a": 1, "b": [None, 2.0]})
    same, _ = flatten({"a": 9, "b": [None, 3.5]})
    other, _ = flatten({"a": 1, "b": [0, 2.0]})
    assert shape_digest(one, 1) == shape_digest(same, 1)
    assert len({shape_digest(one, 1), shape_digest(other, 1), shape_digest(one, 2)}) == 3


def test_bytes_that_are_not_a_packed_sample_are_a_pack_error() -> None:
    rng = random.Random(8)
    template = Template(host_sample(rng, 0))
    data = host_sample(rng, 1)
    packed = pack(flatten(data)[1], template, template_id=1, known={})
    for broken in (packed[: len(packed) // 2], b"\x01", b"\x07abc", b"\x00not zlib", b""):
        with pytest.raises(PackError):
            unpack(broken, template, {})
    with pytest.raises(PackError):
        pack([1, 2], template, template_id=1, known={})
