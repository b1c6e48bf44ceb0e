from collector.netconsole.canary import CanaryStats, parse_canary
from collector.netconsole.parse import parse_datagram

SENT = 1764400000.0


def test_parse_canary() -> None:
    assert parse_canary("freezewatch canary 12 1764400000.250000") == (12, 1764400000.25)
    assert parse_canary("freezewatch canary x 1") is None
    assert parse_canary("usb 1-1: new device") is None
    # As it arrives over netconsole: LOG_USER facility, ERR level.
    rec = parse_datagram(b"11,812,5012345,-;freezewatch canary 4 1764400040.000000")
    assert (rec.facility, rec.level) == (1, 3)
    assert parse_canary(rec.text) == (4, 1764400040.0)


def test_latency_and_a_dropped_canary() -> None:
    stats = CanaryStats()
    for n in range(1, 11):
        sent = SENT + 10 * n
        stats.observe("kmsg", n, sent, sent + 0.010 * n)  # 10..100 ms
        if n != 4:  # dropped on the UDP path
            stats.observe("netconsole", n, sent, sent + 0.002)
    kmsg = stats.summary("kmsg")
    assert (kmsg.received, kmsg.expected, kmsg.lost) == (10, 10, 0)
    assert (kmsg.p50_ms, kmsg.p99_ms) == (50.0, 100.0)
    net = stats.summary("netconsole")
    assert (net.received, net.expected, net.lost) == (9, 10, 1)
    assert net.p50_ms == 2.0
    assert stats.channels() == ["kmsg", "netconsole"]


def test_duplicates_and_window() -> None:
    stats = CanaryStats(window=5)
    assert stats.observe_text("kmsg", "freezewatch canary 1 1764400000.0", SENT + 0.1)
    assert not stats.observe_text("kmsg", "not a canary", SENT)
    stats.observe("kmsg", 1, SENT, SENT + 0.1)
    for n in (2, 3, 9, 10):
        stats.observe("kmsg", n, SENT, SENT + 0.1)
    s = stats.summary("kmsg")
    assert s.duplicates == 1
    assert (s.expected, s.received, s.lost) == (5, 2, 3)  # window 6..10: 6, 7, 8 missing
    # A channel that saw none of them lost all (ask only for channels the host has).
    assert stats.summary("netconsole").lost == 5
