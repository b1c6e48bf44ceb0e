"""NVIDIA's Xid catalog as freezewatch carries it: every code, a mnemonic, NVIDIA's resolutions,
our action and our meaning."""

from __future__ import annotations

from agent.kernel.nvlink import NVLINK_XIDS, decode_nvlink
from agent.kernel.xid_catalog import ACTIONS, xid_catalog, xid_info


def test_every_catalogued_code_is_complete() -> None:
    catalog = xid_catalog()
    # NVIDIA's catalog lists 1-172; nverror.h adds 173-176.
    assert sorted(catalog) == list(range(1, 177))
    for code, info in catalog.items():
        assert info.code == code and info.mnemonic and info.meaning
        assert info.action in ACTIONS
        assert info.fatal == (info.action in ("reset_gpu", "reboot", "inspect_hardware"))


def test_facts_of_well_known_codes() -> None:
    expected = {
        13: ("ROBUST_CHANNEL_GR_EXCEPTION/ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY", "RESTART_APP"),
        31: ("ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "RESTART_APP"),
        48: ("ROBUST_CHANNEL_GPU_ECC_DBE", "WORKFLOW_XID_48"),
        79: ("ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM"),
        119: ("GSP_RPC_TIMEOUT", "RESET_GPU"),
        120: ("GSP_ERROR", "RESET_GPU"),
        149: ("NVLINK_NETIR_ERROR", "WORKFLOW_NVLINK5_ERR"),
        154: ("GPU_RECOVERY_ACTION_CHANGED", "XID_154"),
        175: ("MEMORY_SUBSYSTEM_ERROR", ""),
    }
    for code, (mnemonic, immediate) in expected.items():
        info = xid_info(code)
        assert info is not None and (info.mnemonic, info.immediate) == (mnemonic, immediate)
    assert xid_info(79).needs_reboot and xid_info(119).needs_reset  # type: ignore[union-attr]
    assert not xid_info(13).fatal and xid_info(48).fatal  # type: ignore[union-attr]
    assert xid_info(999) is None


def test_nvlink_decode_follows_nvidias_sheet() -> None:
    assert list(NVLINK_XIDS) == [144, 145, 146, 147, 148, 149, 150]
    # SAW_MVB with error status 0x2 is fatal per the sheet, 0x1 is not.
    fatal = decode_nvlink(144, "SAW_MVB Fatal XC0 i0 Link 00 (0x00000001 0x00000002 0x0 0x0)")
    benign = decode_nvlink(144, "SAW_MVB Nonfatal XC0 i0 Link 00 (0x00000001 0x00000001 0x0 0x0)")
    assert fatal is not None and (fatal.severity, fatal.action) == ("fatal", "reset_gpu")
    assert benign is not None and (benign.severity, benign.action) == ("warning", "none")
    assert decode_nvlink(149, "something else") is None
