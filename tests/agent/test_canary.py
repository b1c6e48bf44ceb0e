from pathlib import Path

import pytest

from agent.canary import Canary, canary_text, choose_level


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("printk", "expected"),
    [
        ("4\t4\t1\t7\n", (3, True)),  # Ubuntu / DGX OS default: only ERR and worse reach consoles
        ("7\t4\t1\t7\n", (5, True)),
        ("8\t4\t1\t7\n", (5, True)),
        ("5\t4\t1\t7\n", (4, True)),
        ("3\t4\t1\t7\n", (3, False)),  # nothing we would write reaches netconsole
    ],
)
def test_level_is_least_severe_that_passes_console(
    tmp_path: Path, printk: str, expected: tuple[int, bool]
) -> None:
    (tmp_path / "printk").write_text(printk)
    assert choose_level(str(tmp_path / "printk")) == expected


def test_writes_numbered_lines_every_interval(tmp_path: Path) -> None:
    kmsg = tmp_path / "kmsg"
    kmsg.touch()
    (tmp_path / "printk").write_text("4\t4\t1\t7\n")
    clock = FakeClock()
    canary = Canary(
        str(kmsg), 10.0, clock, lambda: 1764400000.25, printk_path=str(tmp_path / "printk")
    )
    assert canary.step() == 1
    clock.now += 9.9
    assert canary.step() is None
    clock.now += 0.1
    assert canary.step() == 2
    canary.close()
    assert kmsg.read_text().splitlines() == [
        "<3>freezewatch canary 1 1764400000.250000",
        "<3>freezewatch canary 2 1764400000.250000",
    ]
    assert canary_text(7, 1.5) == "freezewatch canary 7 1.500000"


def test_never_exceeds_kmsg_rate_limit(tmp_path: Path) -> None:
    kmsg = tmp_path / "kmsg"
    kmsg.touch()
    clock = FakeClock()
    canary = Canary(str(kmsg), 0.01, clock, level=5)
    assert canary.interval_s == 0.5  # 10 per 5 s at most
    canary.interval_s = 0.0  # force the backstop: everything is due at once
    written = [canary.step() for _ in range(12)]
    assert written == [*range(1, 11), None, None]
    clock.now += 5.0
    assert canary.step() == 11
    canary.close()


def test_write_failure_is_reported_not_raised(tmp_path: Path) -> None:
    canary = Canary(str(tmp_path / "missing" / "kmsg"), clock=FakeClock(), level=5)
    assert canary.step() is None
    assert canary.last_error and "missing" in canary.last_error
    assert canary.next_n == 1
