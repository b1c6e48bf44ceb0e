from collector.netconsole.loss import MsgidTracker


def test_gap_counts_loss() -> None:
    t = MsgidTracker()
    assert [t.observe(m) for m in (1, 2, 3, 6, 7)] == [0, 0, 0, 2, 0]
    assert (t.received, t.lost) == (5, 2)


def test_wrap_around_u32_is_not_loss() -> None:
    t = MsgidTracker()
    deltas = [t.observe(m) for m in (0xFFFFFFFE, 0xFFFFFFFF, 0, 1, 3)]
    assert deltas == [0, 0, 0, 0, 1]
    assert (t.received, t.lost, t.restarts) == (5, 1, 0)


def test_late_arrival_undoes_loss_and_duplicate_ignored() -> None:
    t = MsgidTracker()
    for m in (10, 11, 13):
        t.observe(m)
    assert t.lost == 1
    assert t.observe(12) == -1
    assert t.observe(12) == 0
    assert t.observe(13) == 0
    assert (t.received, t.lost, t.reordered, t.duplicates) == (4, 0, 1, 2)


def test_gap_beyond_window_is_final() -> None:
    t = MsgidTracker(window=4)
    t.observe(100)
    t.observe(102)  # 101 missing
    for m in range(103, 112):
        t.observe(m)
    assert t.observe(101) == 0  # too late to undo: a straggler, not a restart
    assert (t.lost, t.duplicates, t.restarts) == (1, 1, 0)
    assert t.observe(112) == 0


def test_counter_restart_is_not_loss() -> None:
    t = MsgidTracker(window=8)
    for m in (5000, 5001):
        t.observe(m)
    assert t.observe(1) == 0
    assert t.observe(2) == 0
    assert (t.lost, t.restarts) == (0, 1)
