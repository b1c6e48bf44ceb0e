"""The guard (opt-in, off by default): on the GPU host itself, stop vLLM before the host freezes.

Rules over the agent's own samples and kernel records (``rules``), evaluated on every sample
(``engine``); when one trips, the configured actions run at once (``actions``), at most once
per cooldown, and the firing is an agent event sent at once (spooled while the collector is
away). Dry-run only reports. Nothing here needs the collector to be reachable.
"""
