import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent.netconsole import parse_remote, remove_target, setup_target
from agent.nexthop import find_mac, find_route

FIXTURE_PROC = Path(__file__).parent.parent / "fixtures" / "proc_netconsole"
BOOT = "0b3c2f8e-6f0a-4d4e-9c1b-3a1f0e9d8c7b"
ATTRS = ("enabled", "extended", "release", "dev_name", "local_port", "remote_port")
ATTRS += ("local_ip", "remote_ip", "local_mac", "remote_mac")


def no_run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    raise AssertionError(f"unexpected command {argv}")


def no_poke(ip: str, port: int) -> None:
    raise AssertionError("ARP should already be known")


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    dst = tmp_path / "proc"
    shutil.copytree(FIXTURE_PROC, dst)
    return dst


def netconsole_dir(root: Path) -> Path:
    d = root / "sys/kernel/config/netconsole"
    d.mkdir(parents=True, exist_ok=True)
    return d


def kernel_target(root: Path, name: str = "freezewatch", layout: str | None = "userdata") -> Path:
    """A target dir as the kernel populates it after mkdir (attributes at their defaults)."""
    t = netconsole_dir(root) / name
    t.mkdir()
    for attr in ATTRS:
        (t / attr).write_text("0\n")
    (t / "remote_mac").write_text("ff:ff:ff:ff:ff:ff\n")
    if layout == "userdata":
        (t / "userdata").mkdir()
        for f in ("cpu_nr", "taskname_enabled", "release_enabled", "msgid_enabled"):
            (t / "userdata" / f).write_text("0\n")
    elif layout == "toplevel":
        (t / "msgid_enabled").write_text("0\n")
    return t


def setup(root: Path, proc: Path, remote: str = "192.168.1.20:6666", **kw: Any) -> Any:
    kw.setdefault("run", no_run)
    kw.setdefault("poke", no_poke)
    kw.setdefault("sleep", lambda s: None)
    return setup_target(remote, boot_id=BOOT, sys_root=str(root), proc_root=str(proc), **kw)


def test_on_link_collector_writes_in_order_enabled_last(tmp_path: Path, proc: Path) -> None:
    t = kernel_target(tmp_path)
    report = setup(tmp_path, proc)
    assert report.ok, report.summary()
    assert report.writes == [
        ("dev_name", "enP7s7"),
        ("remote_ip", "192.168.1.20"),
        ("remote_port", "6666"),
        ("remote_mac", "48:b0:2d:12:34:56"),
        ("extended", "1"),
        ("userdata/msgid_enabled", "1"),
        ("userdata/boot/value", BOOT),
        ("enabled", "1"),
    ]
    assert (t / "enabled").read_text() == "1"
    assert (t / "remote_mac").read_text() == "48:b0:2d:12:34:56"
    assert (t / "userdata/boot/value").read_text() == BOOT
    assert report.msgid and report.boot_userdata and report.next_hop == "192.168.1.20"
    assert report.warnings == []


def test_remote_behind_gateway_uses_gateway_mac(tmp_path: Path, proc: Path) -> None:
    kernel_target(tmp_path, layout="toplevel")
    report = setup(tmp_path, proc, "10.20.30.40:7000")
    assert report.ok, report.summary()
    assert (report.dev_name, report.next_hop) == ("enP7s7", "192.168.1.1")
    assert report.remote_mac == "3c:7c:3f:aa:bb:01"
    assert ("msgid_enabled", "1") in report.writes  # the older top-level layout
    assert report.writes[-1] == ("enabled", "1")
    assert not report.boot_userdata
    assert any("userdata" in w for w in report.warnings)


def test_fresh_target_is_created(tmp_path: Path, proc: Path) -> None:
    netconsole_dir(tmp_path)
    report = setup(tmp_path, proc)
    assert report.ok, report.summary()
    assert (tmp_path / "sys/kernel/config/netconsole/freezewatch/enabled").read_text() == "1"
    assert report.actions[0].startswith("created ")
    assert not report.msgid


def test_arp_miss_is_triggered_then_reread(tmp_path: Path, proc: Path) -> None:
    kernel_target(tmp_path)
    pokes: list[tuple[str, int]] = []

    def poke(ip: str, port: int) -> None:
        pokes.append((ip, port))
        arp = proc / "net/arp"
        arp.write_text(
            arp.read_text().replace(
                "0x0         00:00:00:00:00:00", "0x2         aa:bb:cc:dd:ee:30"
            )
        )

    report = setup(tmp_path, proc, "192.168.1.30:6666", poke=poke)
    assert report.ok and report.remote_mac == "aa:bb:cc:dd:ee:30"
    assert pokes == [("192.168.1.30", 6666)]


def test_unresolved_mac_falls_back_to_broadcast_with_warning(tmp_path: Path, proc: Path) -> None:
    kernel_target(tmp_path)
    pokes: list[str] = []
    report = setup(tmp_path, proc, "192.168.1.99", poke=lambda ip, port: pokes.append(ip))
    assert report.ok and report.remote_mac == "ff:ff:ff:ff:ff:ff"
    assert report.remote_port == 6666 and len(pokes) == 3
    assert any("broadcast" in w for w in report.warnings)


def test_no_configfs(tmp_path: Path, proc: Path) -> None:
    report = setup(tmp_path, proc)
    assert (report.ok, report.error_kind) == (False, "no_configfs")
    assert report.writes == []


def test_configfs_unmounted_and_mount_fails(tmp_path: Path, proc: Path) -> None:
    (tmp_path / "sys/kernel/config").mkdir(parents=True)
    calls: list[list[str]] = []

    def run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 32, "", "mount: permission denied")

    report = setup(tmp_path, proc, run=run)
    assert report.error_kind == "no_configfs" and "permission denied" in (report.error or "")
    assert calls == [["mount", "-t", "configfs", "configfs", str(tmp_path / "sys/kernel/config")]]


def test_module_loaded_on_demand(tmp_path: Path, proc: Path) -> None:
    (tmp_path / "sys/kernel/config/pci_ep").mkdir(parents=True)  # configfs is mounted

    def run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        assert argv == ["modprobe", "netconsole"]
        netconsole_dir(tmp_path)
        return subprocess.CompletedProcess(argv, 0, "", "")

    report = setup(tmp_path, proc, run=run)
    assert report.ok, report.summary()
    assert report.actions[0] == "ran modprobe netconsole"


def test_no_module(tmp_path: Path, proc: Path) -> None:
    (tmp_path / "sys/kernel/config/pci_ep").mkdir(parents=True)

    def run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        err = "modprobe: FATAL: Module netconsole not found"
        return subprocess.CompletedProcess(argv, 1, "", err)

    report = setup(tmp_path, proc, run=run)
    assert report.error_kind == "no_module" and "not found" in (report.error or "")


def test_target_busy_with_other_settings(tmp_path: Path, proc: Path) -> None:
    t = kernel_target(tmp_path)
    (t / "enabled").write_text("1\n")
    (t / "remote_ip").write_text("192.168.1.77\n")
    report = setup(tmp_path, proc)
    assert report.error_kind == "busy" and "remote_ip" in (report.error or "")
    assert report.writes == []
    assert (t / "remote_ip").read_text() == "192.168.1.77\n"


def test_replace_disables_first(tmp_path: Path, proc: Path) -> None:
    t = kernel_target(tmp_path)
    (t / "enabled").write_text("1\n")
    report = setup(tmp_path, proc, replace=True)
    assert report.ok
    assert report.writes[0] == ("enabled", "0") and report.writes[-1] == ("enabled", "1")


def test_already_enabled_same_settings_writes_nothing(tmp_path: Path, proc: Path) -> None:
    t = kernel_target(tmp_path)
    for attr, value in (
        ("enabled", "1"),
        ("dev_name", "enP7s7"),
        ("remote_ip", "192.168.1.20"),
        ("remote_port", "6666"),
        ("remote_mac", "48:b0:2d:12:34:56"),
        ("extended", "1"),
    ):
        (t / attr).write_text(value + "\n")
    report = setup(tmp_path, proc)
    assert report.ok and report.already_enabled and report.writes == []


def test_no_route(tmp_path: Path, proc: Path) -> None:
    kernel_target(tmp_path)
    route = proc / "net/route"
    rows = route.read_text().splitlines()
    route.write_text("\n".join(r for r in rows if r.split()[1] != "00000000") + "\n")
    report = setup(tmp_path, proc, "8.8.8.8:6666")
    assert report.error_kind == "no_route"
    assert report.writes == []


def test_unresolvable_host(tmp_path: Path, proc: Path) -> None:
    def resolve(name: str) -> str:
        raise OSError("Name or service not known")

    report = setup(tmp_path, proc, "collector.invalid:6666", resolve=resolve)
    assert report.error_kind == "no_route"


def test_route_and_arp_parsing(proc: Path) -> None:
    assert find_route("192.168.1.20", str(proc)) == ("enP7s7", None)
    assert find_route("172.17.0.2", str(proc)) == ("docker0", None)
    assert find_route("10.1.2.3", str(proc)) == ("enP7s7", "192.168.1.1")
    assert find_mac("192.168.1.30", "enP7s7", str(proc)) is None  # incomplete entry
    assert find_mac("192.168.1.1", "docker0", str(proc)) is None
    assert parse_remote("collector:7000") == ("collector", 7000)
    assert parse_remote("collector") == ("collector", 6666)


def test_remove_target(tmp_path: Path, proc: Path) -> None:
    t = kernel_target(tmp_path)
    assert setup(tmp_path, proc).ok
    removed: list[str] = []

    def rmdir(path: str) -> None:  # configfs rmdir drops attribute files; a tmp dir needs rmtree
        removed.append(path)
        shutil.rmtree(path)

    report = remove_target("freezewatch", str(tmp_path), rmdir=rmdir)
    assert report.ok
    assert report.actions[0] == "wrote enabled = 0"
    assert removed == [str(t / "userdata/boot"), str(t)]
    assert not t.exists()
    assert remove_target("freezewatch", str(tmp_path)).ok  # absent is fine
