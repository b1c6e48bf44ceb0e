"""rsyslog as the peer of the line path: a sender (imkmsg, or imfile on the bench's file) that
forwards over TCP (omfwd) to a receiver (imtcp on 127.0.0.1) that writes each message to a file
(omfile). Both run in the foreground (``-n``) on configs generated here, never the system's."""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench._common import free_port
from bench._peers_procs import Procs

RSYSLOGD = Path("/usr/sbin/rsyslogd")


def available() -> tuple[bool, str]:
    if not RSYSLOGD.exists():
        return False, f"{RSYSLOGD} missing (apt install rsyslog)"
    return True, ""


def receiver_config(workdir: Path, port: int, out: Path) -> str:
    """imtcp on 127.0.0.1:``port`` → ``out``, one message text a line."""
    return f"""\
global(workDirectory="{workdir}")
module(load="imtcp")
input(type="imtcp" address="127.0.0.1" port="{port}")
template(name="msgonly" type="string" string="%msg%\\n")
action(type="omfile" file="{out}" template="msgonly")
"""


def sender_config(workdir: Path, port: int, source: Path | None) -> str:
    """imkmsg (``source`` None) or imfile following ``source`` → omfwd TCP to 127.0.0.1."""
    if source is None:
        inputs = 'module(load="imkmsg")\n'
    else:
        inputs = (
            'module(load="imfile" mode="inotify")\n'
            f'input(type="imfile" file="{source}" tag="fwpeers:" freshStartTail="off")\n'
        )
    return f"""\
global(workDirectory="{workdir}")
{inputs}action(type="omfwd" target="127.0.0.1" port="{port}" protocol="tcp"
       template="RSYSLOG_ForwardFormat")
"""


def wait_listening(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on 127.0.0.1:{port}") from None
            time.sleep(0.05)


@dataclass
class Rsyslog:
    """A running sender → receiver pair; ``out`` is the receiver's file."""

    sender_pid: int
    receiver_pid: int
    out: Path


def start(procs: Procs, workdir: Path, source: Path | None) -> Rsyslog:
    """Receiver first (the sender's first refused connection would hold it back for its
    30 s resume interval), then the sender reading /dev/kmsg (``source`` None) or ``source``."""
    pids = {}
    port = free_port()
    out = workdir / "rsyslog-out.log"
    for role, text in (
        ("receiver", receiver_config(workdir / "receiver", port, out)),
        ("sender", sender_config(workdir / "sender", port, source)),
    ):
        (workdir / role).mkdir(parents=True)
        conf = workdir / f"rsyslog-{role}.conf"
        conf.write_text(text)
        argv = [str(RSYSLOGD), "-n", "-f", str(conf), "-i", str(workdir / f"{role}.pid")]
        pids[role] = procs.start(f"rsyslog-{role}", argv)
        if role == "receiver":
            wait_listening(port)
    return Rsyslog(sender_pid=pids["sender"], receiver_pid=pids["receiver"], out=out)


def validate(conf_text: str, workdir: Path) -> str:
    """``rsyslogd -N1`` on a config: '' when valid, else rsyslog's complaint."""
    conf = workdir / "check.conf"
    conf.write_text(conf_text)
    run = subprocess.run(
        [str(RSYSLOGD), "-N1", "-f", str(conf)], capture_output=True, text=True, timeout=30
    )
    return "" if run.returncode == 0 else run.stdout + run.stderr
