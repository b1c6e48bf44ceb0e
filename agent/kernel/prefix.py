"""A kernel log line's message, whatever printed it: the prefixes of dmesg (monotonic, ``-T``,
``-H``, ``--time-format iso``, ``--decode``), journalctl (short, short-iso, short-precise,
short-monotonic; with or without a host name; any locale's month), syslog, printk caller ids,
``<N>`` priorities, raw ``/dev/kmsg`` records and container/cluster log shippers, or none.

Each pattern is anchored and peeled off in turn; what no pattern recognises is the message.
The classifier finds an event by its subsystem tag wherever it sits in the line, so a prefix
this module does not know costs only the process name of a few events, never the event.
"""

from __future__ import annotations

import re

_PRIO = re.compile(r"<\d{1,3}>")
# /dev/kmsg: "prio,seq,usec,flags[,caller=T1];message"
_KMSG = re.compile(r"\d+,\d+,\d+,[^;,]*(?:,[^;]*)?;")
# dmesg --decode / -x: "kern  :err   : "
_DECODE = re.compile(
    r"(?:kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|local[0-7])\s*:"
    r"(?:emerg|alert|crit|err|warn|notice|info|debug)\s*: "
)
# Cluster shippers: "10.0.0.7: kern: warning: [...]: " (Talos), "kern.warn: "
_SHIPPER = re.compile(
    r"(?:[\w.:-]+: )?(?:kern|kernel)(?:\.[a-z]+)?: (?:emerg|alert|crit|error|err|warning|warn|"
    r"notice|info|debug)?:? ?"
)
_CRI = re.compile(r"(?:stdout|stderr) [FP] ")
_BRACKET_TIME = re.compile(
    r"\[(?:\s*\+?\d+[.,]\d+"  # dmesg monotonic, -H relative "[  +0.000049]"
    r"|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d \d{4}"  # dmesg -T
    r"|[A-Z][a-z]{2}\d{1,2} \d\d:\d\d"  # dmesg -H, first line of a minute
    r"|\d{4}-\d\d-\d\d[T ][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?)\]:?\s?"
)
_CALLER = re.compile(r"\[\s*[CT]\d+\]\s?")
_ISO = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?:?\s+")
# "Mar 29 15:38:59", "déc. 08 12:07:18", "avril 21 22:46:38", "11月 15 14:15:47"
_SYSLOG = re.compile(r"(?:[^\W\d_]{3,9}\.?|\d{1,2}月) {1,2}\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?\s+")
# After a journal/syslog time: "[host ]kernel[pid]: " (journalctl --no-hostname drops the host),
# or metalog's "[kernel] "; syslog may glue the kernel's time on: "host kernel:[   44.947] "
_IDENT = re.compile(r"(?:\S+ )?kernel(?:\[\d+\])?:(?: |(?=\[))|\[kernel\] ")
# syslogd's wall relay of an emergency line: " kernel:[   44.916169] Internal error: ..."
_WALL = re.compile(r"\s*kernel:(?=\[)")

# Messages that begin with their subsystem tag carry no prefix.
_BARE = ("NVRM", "nvidia", "NV_ERR_", "watchdog: ", "INFO: task ", "rcu: ", "Out of memory")
_ANYWHERE = (_PRIO, _KMSG, _DECODE, _CRI, _CALLER, _WALL)
_TIMES = (_BRACKET_TIME, _ISO, _SYSLOG)


def opens_record(line: str) -> bool:
    """The line, however indented, starts with what only a record's first line carries: a time
    (dmesg's, the journal's, syslog's) or a raw kmsg header. A continuation (dmesg's or the
    journal's later lines of a message, a kmsg dictionary line) never does."""
    text = line.lstrip(" \t")
    m = _PRIO.match(text)  # pstore, dmesg -r: "<4>[  12.345678] ..."
    if m:
        text = text[m.end() :]
    return any(pattern.match(text) for pattern in (_KMSG, *_TIMES))


def kernel_message(line: str) -> str:
    """The kernel message of one log line, every known prefix removed (leading spaces of a
    stack-trace frame are kept)."""
    text = line.rstrip("\r\n")
    if text.startswith(_BARE):
        return text  # the agent ships bare messages: no prefix to look for
    for _ in range(8):  # each round peels one prefix; real lines carry at most five
        for pattern in _ANYWHERE:
            m = pattern.match(text)
            if m:
                text = text[m.end() :]
                break
        else:
            for pattern in _TIMES:
                m = pattern.match(text)
                if m:
                    text = text[m.end() :]
                    ident = _IDENT.match(text)
                    if ident:
                        text = text[ident.end() :]
                    break
            else:
                m = _SHIPPER.match(text)
                if m is None or not m.group(0).strip():
                    return text
                text = text[m.end() :]
    return text
