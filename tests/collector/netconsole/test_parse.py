from collector.netconsole.parse import parse_datagram, unescape


def test_extended_record_with_dictionary_and_sysdata() -> None:
    raw = (
        b"3,1042,501151268,-,caller=T812;NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off\n"
        b" SUBSYSTEM=pci\n"
        b" DEVICE=+pci:0000:01:00.0\n"
        b" cpu=7\n"
        b" taskname=kworker/7:1\n"
        b" release=6.11.0-1016-nvidia\n"
        b" msgid=4242\n"
        b" boot=0b3c2f8e-6f0a-4d4e-9c1b-3a1f0e9d8c7b"
    )
    r = parse_datagram(raw)
    assert (r.kseq, r.level, r.facility, r.usec) == (1042, 3, 0, 501151268)
    assert r.text == "NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off"
    assert r.fields == {"SUBSYSTEM": "pci", "DEVICE": "+pci:0000:01:00.0"}
    assert (r.cpu, r.taskname, r.msgid) == (7, "kworker/7:1", 4242)
    assert r.release == "6.11.0-1016-nvidia"
    assert r.boot == "0b3c2f8e-6f0a-4d4e-9c1b-3a1f0e9d8c7b"
    assert r.caller == "T812"
    assert r.fragment is None and r.extended and not r.cont


def test_release_prepend_and_facility() -> None:
    r = parse_datagram(b"6.4.0,6,444,501151268,-;netconsole: network logging started")
    assert r.release == "6.4.0"
    assert (r.kseq, r.level, r.facility) == (444, 6, 0)
    assert r.text == "netconsole: network logging started"
    user = parse_datagram(b"13,7,1,c;freezewatch canary 1 1764400000.000000")
    assert (user.level, user.facility, user.cont) == (5, 1, True)


def test_escapes_are_undone_including_utf8_bytes() -> None:
    r = parse_datagram(b"4,9,10,-;tab\\x09here back\\x5cslash caf\\xc3\\xa9")
    assert r.text == "tab\there back\\slash café"
    assert unescape(b"\\xff") == "\ufffd"


def test_unknown_header_fields_are_ignored() -> None:
    r = parse_datagram(b"6,12,99,-,future=1,other;hello")
    assert (r.kseq, r.text, r.fragment) == (12, "hello", None)


def test_fragment_header() -> None:
    r = parse_datagram(b"6,416,1758426,-,ncfrag=16/31; the 2nd chunk.")
    assert r.fragment == (16, 31)
    assert r.kseq == 416
    assert r.body == b" the 2nd chunk."


def test_plain_datagrams_have_no_seq() -> None:
    r = parse_datagram(b"[  123.456789] usb 1-1: new high-speed USB device number 2\n")
    assert r.kseq is None and r.level is None and not r.extended
    assert r.text == "[  123.456789] usb 1-1: new high-speed USB device number 2"
    # A semicolon in plain text does not make it a header.
    odd = parse_datagram(b"eth0: link up; speed 1000")
    assert odd.kseq is None and odd.text == "eth0: link up; speed 1000"


def test_non_dictionary_continuation_kept_as_text() -> None:
    r = parse_datagram(b"6,5,1,-;first\nnot a dict line\n KEY=v")
    assert r.text == "first\nnot a dict line"
    assert r.fields == {"KEY": "v"}


def test_a_printed_nul_is_kept_as_written() -> None:
    assert unescape(b"nul \\x00 and tab \\x09") == "nul \\x00 and tab \t"
