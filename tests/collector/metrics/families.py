"""Sample sections in the agent's wire shape (NVML on a GB10, one vLLM endpoint)."""

from __future__ import annotations

from typing import Any

GPU: dict[str, Any] = {
    "index": 0,
    "pci": "0000000F:01:00.0",
    "name": "NVIDIA GB10",
    "util": 87,
    "mem_used": None,  # unified memory: NVML reports no framebuffer on GB10
    "mem_total": None,
    "temp_c": 71,
    "power_w": 62.5,
    "clocks": {"sm": 2418, "mem": None, "graphics": 2418},
    "unsupported": ["memory"],
}
VLLM: list[dict[str, Any]] = [
    {
        "url": "http://127.0.0.1:8000",
        "health": 200,
        "health_ms": 1.8,
        "error": None,
        "running": 3,
        "waiting": 1,
        "kv_usage": 0.42,
        "preemptions": 0,
        "prompt_tokens": 120000,
        "generation_tokens": 9000,
        "spec_accepted": None,
        "spec_draft": None,
    }
]
