"""The next hop to an IPv4 address: its interface and gateway from ``/proc/net/route``, its MAC
from ``/proc/net/arp``, and a datagram to make the kernel resolve that MAC when it has none."""

from __future__ import annotations

import ipaddress
import os
import socket
import struct

_RTF_UP = 0x1
_ATF_COM = 0x2  # ARP entry complete


def find_route(ip: str, proc_root: str = "/proc") -> tuple[str, str | None] | None:
    """(interface, gateway or None when on-link) of the best IPv4 route to ``ip``."""
    dest = int(ipaddress.IPv4Address(ip))
    best: tuple[int, int, str, str | None] | None = None  # (-prefix, metric, dev, gw)
    try:
        with open(os.path.join(proc_root, "net/route")) as f:
            rows = f.read().splitlines()[1:]
    except OSError:
        return None
    for row in rows:
        cols = row.split()
        if len(cols) < 8:
            continue
        dev, net, gw, flags, metric, mask = cols[0], cols[1], cols[2], cols[3], cols[6], cols[7]
        if not int(flags, 16) & _RTF_UP:
            continue
        net_i, mask_i = _le_ip(net), _le_ip(mask)
        if dest & mask_i != net_i:
            continue
        key = (-bin(mask_i).count("1"), int(metric), dev, _gateway(gw))
        if best is None or key[:2] < best[:2]:
            best = key
    return None if best is None else (best[2], best[3])


def find_mac(ip: str, dev: str, proc_root: str = "/proc") -> str | None:
    """Complete ARP entry for ``ip`` on ``dev`` from /proc/net/arp, or None."""
    try:
        with open(os.path.join(proc_root, "net/arp")) as f:
            rows = f.read().splitlines()[1:]
    except OSError:
        return None
    for row in rows:
        cols = row.split()
        if len(cols) >= 6 and cols[0] == ip and cols[5] == dev and int(cols[2], 16) & _ATF_COM:
            return cols[3].lower()
    return None


def _le_ip(hex_word: str) -> int:
    """/proc/net/route prints addresses as native-order hex words (little-endian on arm64)."""
    return int(ipaddress.IPv4Address(struct.pack("=I", int(hex_word, 16))))


def _gateway(hex_word: str) -> str | None:
    value = _le_ip(hex_word)
    return str(ipaddress.IPv4Address(value)) if value else None


def udp_poke(ip: str, port: int) -> None:
    """Send one empty datagram so the kernel resolves the next hop's MAC (ARP)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"", (ip, port))
