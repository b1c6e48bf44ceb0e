"""vLLM's side of a host: its log parsed into server starts, phases and startup plans,
the hang detector over its metrics, and its status.

Imports readback (the latest sample) and the base modules.
"""
