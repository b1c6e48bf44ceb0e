"""Writing a file on a host over an SSH exec channel: its bytes on stdin, written beside the
destination and renamed over it (a reader never sees half a file), with the mode set first.

An exec channel rather than SFTP: it needs nothing but the shell every other remote command
uses, works on hosts that disable the SFTP subsystem, and runs under ``sudo -n`` when the
login user is not root.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from collector.remote.connect import (
    DEFAULT_CONNECT_TIMEOUT_S,
    SSH_DOWN,
    SSHError,
    SSHTarget,
    connect,
)

# $1 destination, $2 file mode, $3 mode of the directory when it has to be made.
_PUT = (
    'set -e; dest=$1; dir=$(dirname "$dest"); '
    '[ -d "$dir" ] || { mkdir -p "$dir"; chmod "$3" "$dir"; }; '
    'umask 077; tmp="$dest.freezewatch-new"; cat > "$tmp"; chmod "$2" "$tmp"; mv -f "$tmp" "$dest"'
)


def put_command(path: str, *, mode: int, dir_mode: int, sudo: Sequence[str] = ()) -> list[str]:
    """The argv that writes stdin to ``path`` (what ``put_file`` runs)."""
    return [*sudo, "sh", "-c", _PUT, "freezewatch-put", path, f"{mode:04o}", f"{dir_mode:04o}"]


def put_file(
    target: SSHTarget,
    path: str,
    data: bytes,
    *,
    mode: int,
    dir_mode: int = 0o755,
    sudo: Sequence[str] = (),
    timeout: float = 120.0,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> None:
    """Write ``data`` to ``path`` on the target; SSHError says why it could not."""
    command = shlex.join(put_command(path, mode=mode, dir_mode=dir_mode, sudo=sudo))
    client = connect(target, timeout=connect_timeout)
    try:
        transport = client.get_transport()
        assert transport is not None
        chan = transport.open_session(timeout=connect_timeout)
        chan.settimeout(timeout)
        chan.exec_command(command)
        chan.sendall(data)
        chan.shutdown_write()
        stderr = chan.makefile_stderr("rb").read()
        status = chan.recv_exit_status()
    except SSH_DOWN as exc:  # a timeout is an OSError
        raise SSHError(target.host, f"writing {path} failed: {exc}") from exc
    finally:
        client.close()
    if status != 0:
        detail = stderr.decode(errors="replace").strip()[-500:]
        raise SSHError(target.host, f"writing {path} failed (exit {status}): {detail}")
