"""Storing an agent batch: raw rows without duplicates, merged with the copies another
channel brought, then what the batch implies (kernel events, vLLM, the heartbeat).

Imports liveness, kernel, vllm, readback, hosts and the base modules.
"""
