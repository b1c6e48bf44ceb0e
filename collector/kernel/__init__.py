"""Kernel lines: which ones announce an event (NVIDIA faults, freeze precursors) and what
each means; storing them once per record, in vLLM's context; their alerts.

Imports vllm (the context), alerts, readback and the base modules.
"""
