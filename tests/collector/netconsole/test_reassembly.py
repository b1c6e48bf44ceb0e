from collector.netconsole.parse import parse_datagram
from collector.netconsole.reassembly import Reassembler

SRC = ("spark-01", "10.0.0.5")
# The netconsole.rst example (split at offset 16), its body extended by a msgid line.
FRAG_A = b"6,416,1758426,-,ncfrag=0/40;the first chunk,"
FRAG_B = b"6,416,1758426,-,ncfrag=16/40; the 2nd chunk.\n msgid=9"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_in_order_fragments_make_one_record() -> None:
    r = Reassembler(clock=FakeClock())
    assert r.add(SRC, parse_datagram(FRAG_A), "a") == []
    [(ctx, rec)] = r.add(SRC, parse_datagram(FRAG_B), "b")
    assert ctx == "a"  # the first datagram's context travels with the record
    assert rec.text == "the first chunk, the 2nd chunk."
    assert rec.msgid == 9 and rec.kseq == 416
    assert rec.fragment is None and not rec.incomplete
    assert r.pending == 0


def test_out_of_order_fragments_assembled_by_offset() -> None:
    r = Reassembler(clock=FakeClock())
    assert r.add(SRC, parse_datagram(FRAG_B)) == []
    [(_, rec)] = r.add(SRC, parse_datagram(FRAG_A))
    assert rec.text == "the first chunk, the 2nd chunk."


def test_same_seq_from_two_sources_kept_apart() -> None:
    r = Reassembler(clock=FakeClock())
    r.add(SRC, parse_datagram(FRAG_A))
    assert r.add(("spark-02", "10.0.0.6"), parse_datagram(FRAG_B)) == []
    assert r.pending == 2


def test_missing_fragment_emitted_incomplete_after_timeout() -> None:
    clock = FakeClock()
    r = Reassembler(timeout_s=2.0, clock=clock)
    r.add(SRC, parse_datagram(FRAG_B))
    clock.now += 1.9
    assert r.flush_expired() == []
    clock.now += 0.2
    [(_, rec)] = r.flush_expired()
    assert rec.incomplete and rec.missing_bytes == 16
    assert rec.text == "[netconsole: 16 bytes missing] the 2nd chunk."
    assert rec.msgid == 9
    assert r.pending == 0 and r.incomplete == 1


def test_duplicate_fragment_and_non_fragment_pass_through() -> None:
    r = Reassembler(clock=FakeClock())
    r.add(SRC, parse_datagram(FRAG_A))
    assert r.add(SRC, parse_datagram(FRAG_A)) == []
    plain = parse_datagram(b"6,1,1,-;whole")
    assert r.add(SRC, plain, "ctx") == [("ctx", plain)]


def test_pending_bounded_evicts_oldest_as_incomplete() -> None:
    clock = FakeClock()
    r = Reassembler(clock=clock, max_pending=1)
    r.add(SRC, parse_datagram(FRAG_A))
    clock.now += 1
    [(_, evicted)] = r.add(SRC, parse_datagram(b"6,417,1,-,ncfrag=0/20;x"))
    assert evicted.kseq == 416 and evicted.incomplete
