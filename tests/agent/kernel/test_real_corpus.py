"""The classifier scored on real kernel logs copied from public bug reports and GPU-health
projects (``tests/fixtures/real/kernel``, each file naming its source): at least 98 % of the
faults named with the right kind and code, and no benign line ever flagged."""

from __future__ import annotations

from agent.kernel.classify import classify_kernel_line
from collector.kernel.records import read_kernel_log
from tests.support.real_corpus import kernel_files, score_lines, score_records

MIN_RECALL = 0.98


def test_the_corpus_is_real_and_large() -> None:
    files = kernel_files()
    assert all(f.header.get("source", "").startswith("https://") for f in files)
    lines = sum(len(f.lines) for f in files)
    faults = sum(1 for f in files for e in f.labels if e.kind not in (None, "~"))
    kinds = {e.kind for f in files for e in f.labels if e.kind not in (None, "~")}
    assert lines >= 1000 and faults >= 150
    assert {"xid", "sxid", "gsp", "nv_err", "uvm", "bus_off", "oops", "oom_kill"} <= kinds


def test_each_line_as_ingest_sees_it() -> None:
    score = score_lines(kernel_files(), classify_kernel_line)
    assert not score.false_alarms, "\n".join(score.false_alarms)
    assert score.recall >= MIN_RECALL, "\n".join(score.misses)


def test_whole_files_as_inspect_and_pstore_read_them() -> None:
    score = score_records(kernel_files(), read_kernel_log)
    assert not score.false_alarms, "\n".join(score.false_alarms)
    assert score.recall >= MIN_RECALL, "\n".join(score.misses)


def test_an_oops_is_one_event_in_its_module() -> None:
    [oops] = [f for f in kernel_files() if f.path.name == "ogkm-1107-oops-nvidia-vma-access.txt"]
    [event] = read_kernel_log(oops.lines)
    assert (event.event.kind, event.event.module) == ("oops", "nvidia")
    assert "nvidia_vma_access" in (event.event.meaning or "")


def test_each_uncorrected_aer_report_is_one_event_and_corrected_floods_none() -> None:
    files = {f.path.name: f for f in kernel_files()}
    fatal = read_kernel_log(files["aer-uncorrected-fatal-gpu-link.txt"].lines)
    assert [(e.event.kind, e.event.code, e.event.device) for e in fatal] == [
        ("aer", "fatal", "0000:00:02.0"),
        ("xid", "79", "0000:02:00"),
        ("aer", "fatal", "0000:00:03.0"),
        ("aer", "fatal", "0000:00:1c.4"),
        ("aer", "fatal", None),
        ("aer", "fatal", "0000:00:01.1"),
    ]
    assert read_kernel_log(files["aer-corrected-floods-benign.txt"].lines) == []


def test_each_fatal_ghes_record_is_one_unattributed_event_and_the_rest_none() -> None:
    files = {f.path.name: f for f in kernel_files()}
    fatal = read_kernel_log(files["ghes-fatal-pcie-cper-panics.txt"].lines)
    assert [(e.event.kind, e.event.code, e.event.module) for e in fatal] == [
        ("oops", "hardware", None)
    ] * 4
    assert read_kernel_log(files["ghes-corrected-recoverable-bert-benign.txt"].lines) == []
