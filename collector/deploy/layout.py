"""What an agent install is on a host: its files (paths, modes, contents) and the systemd
commands that start, stop and forget it. Pure: nothing here touches a host.

``root`` puts every path under another directory (an image being built, a chroot, a test);
the files' contents still name the real paths.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import agent

AGENT_PATH = "/opt/freezewatch/freezewatch-agent.pyz"
UNIT_PATH = "/etc/systemd/system/freezewatch-agent.service"
ENV_PATH = "/etc/freezewatch/agent.env"
# Loads netconsole at boot, before the agent starts (the unit may not load modules itself).
MODULES_LOAD_PATH = "/etc/modules-load.d/freezewatch-netconsole.conf"
# What the agent writes at run time (sequence numbers, the spool): kept by an uninstall, since
# a reinstall in the same boot must continue the sequence or its records look like duplicates.
STATE_DIR = "/var/lib/freezewatch"
UNIT = "freezewatch-agent.service"
UNIT_TEMPLATE = Path(agent.__file__).resolve().parent / UNIT
DEFAULT_PYTHON = "/usr/bin/python3"
ENV_PREFIX = "FREEZEWATCH_AGENT_"
# systemd's EnvironmentFile takes KEY=VALUE lines; values here never need quoting.
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.:/@%+=,\-\[\]]*$")

START = (
    ("systemctl", "daemon-reload"),
    ("systemctl", "enable", UNIT),
    ("systemctl", "restart", UNIT),
)
# The unit may not load modules (ProtectKernelModules): with --netconsole a deploy loads the
# module now, as the modules-load file does at every boot, before the agent starts.
LOAD_NETCONSOLE = ("modprobe", "netconsole")
STOP = (("systemctl", "disable", "--now", UNIT),)
FORGET = (("systemctl", "daemon-reload"),)


@dataclass(frozen=True)
class RemoteFile:
    path: str  # on the host, under the install root
    mode: int
    data: bytes
    dir_mode: int = 0o755

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def under(root: str, path: str) -> str:
    return path if root in ("", "/") else root.rstrip("/") + path


def env_file(values: dict[str, str], *, host: str) -> bytes:
    """``/etc/freezewatch/agent.env``: the agent's settings as ``FREEZEWATCH_AGENT_*`` lines."""
    out = [
        f"# freezewatch agent settings for {host}, written by freezewatch-collector deploy-agent.",
        "# Holds the agent token: keep it mode 0600. A new deploy rewrites this file.",
    ]
    for key, value in values.items():
        if not _SAFE_VALUE.match(value):
            raise ValueError(f"{key}: {value!r} cannot go into a systemd environment file")
        out.append(f"{ENV_PREFIX}{key}={value}")
    return ("\n".join(out) + "\n").encode()


def parse_env(text: str) -> dict[str, str]:
    """The ``FREEZEWATCH_AGENT_*`` settings of an env file, prefix removed."""
    values = {}
    for line in text.splitlines():
        key, eq, value = line.strip().partition("=")
        if eq and key.startswith(ENV_PREFIX):
            values[key.removeprefix(ENV_PREFIX)] = value.strip()
    return values


def unit_file(python: str = DEFAULT_PYTHON) -> bytes:
    """The packaged unit, its ExecStart pointing at the host's own python3."""
    text = UNIT_TEMPLATE.read_text()
    text = text.replace(f"ExecStart={DEFAULT_PYTHON} ", f"ExecStart={python} ")
    return text.encode()


def install_files(
    *, root: str, bundle: bytes, env: bytes, python: str, netconsole: bool
) -> list[RemoteFile]:
    files = [
        RemoteFile(under(root, AGENT_PATH), 0o755, bundle),
        RemoteFile(under(root, UNIT_PATH), 0o644, unit_file(python)),
        RemoteFile(under(root, ENV_PATH), 0o600, env, dir_mode=0o700),
    ]
    if netconsole:
        files.append(RemoteFile(under(root, MODULES_LOAD_PATH), 0o644, b"netconsole\n"))
    return files


def installed_paths(root: str) -> list[str]:
    """Every file an install may have written (an uninstall removes them all)."""
    return [under(root, p) for p in (AGENT_PATH, UNIT_PATH, ENV_PATH, MODULES_LOAD_PATH)]


def installed_dirs(root: str) -> list[str]:
    """Directories an install made for its files alone (removed when left empty)."""
    return [under(root, "/opt/freezewatch"), under(root, "/etc/freezewatch")]
