"""A Python traceback's lines as vLLM's log carries them: the source line a frame quotes, the
exception line that ends it, a frame (whose indent a paste may have lost)."""

from __future__ import annotations

import re

from collector.vllm import log_formats as fmt

# How a traceback's source line begins: a statement's keyword, a name called, indexed or
# assigned, or a string literal (the rest of a statement 3.13 shows over several lines). A
# paste indented as a whole (vllm#6234's) starts its own lines otherwise: an exception's "Name:
# message" (Ray's "RayTaskError(OutOfMemoryError): ..." too), uvicorn's "INFO:     ...", a
# process tag, a rank prefix, a sentence, C++'s "what():  ...".
_CODE = re.compile(
    r"(?:raise|return|assert|yield|await|async|with|for|if|elif|else|while|try|except|finally|"
    r"del|pass|import|from|lambda|not)\b|(?!what\(\):)[A-Za-z_][\w.]*(?:\(|\[|\s*[-+*/|&]?=(?!=))|"
    r"[rRbBfFuU]{0,2}[\"']"
)
_RAISED_NAME = re.compile(r"(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b")


def is_source_line(msg: str) -> bool:
    """A traceback's source line (Python indents it by four spaces, its "File" line by two): the
    raise statement quotes the error's message ('raise ValueError("No available memory for the
    cache blocks. "'), but only the exception line below it says the error was raised, and is
    its text. Python code only (``_CODE``): a paste indented as a whole keeps its outcome lines.
    """
    code = msg.lstrip()
    if not msg.startswith("    ") or _RAISED_NAME.match(code):
        return False
    return _CODE.match(code) is not None


def is_exception(msg: str) -> bool:
    """A traceback's exception line: unindented, an exception's name (and its message)."""
    return not msg[:1].isspace() and fmt.EXCEPTION.match(msg) is not None


def traceback_line(msg: str) -> bool:
    """A traceback's frame or source line: indented, or a frame whose indent a paste lost."""
    return msg[:1].isspace() or fmt.FRAME.match(msg) is not None
