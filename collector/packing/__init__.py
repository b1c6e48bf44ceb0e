"""A sample's ``data`` in a few bytes: its keys and the values that hold still live once in a
template; a row holds only what moved, as small integers, and nothing of what its typed
columns hold. ``unpack`` gives back the same dict: the same keys in the same order, the same
values of the same types.

The agent sends the same keys every second and most values barely move. A template is a
host's first sample of a shape (keys, nesting, null leaves) that day, stored once
(``models.SampleTemplate``); rows name it by id. Imports nothing of the collector: the schema
(``models``) unpacks with it.
"""

from collector.packing.codes import PackError
from collector.packing.rows import (
    FORMAT_PACKED,
    FORMAT_PLAIN,
    KNOWN_PATHS,
    Template,
    header,
    pack,
    pack_plain,
    unpack,
)
from collector.packing.shape import Skeleton, flatten, shape_digest

__all__ = [
    "FORMAT_PACKED",
    "FORMAT_PLAIN",
    "KNOWN_PATHS",
    "PackError",
    "Skeleton",
    "Template",
    "flatten",
    "header",
    "pack",
    "pack_plain",
    "shape_digest",
    "unpack",
]
