"""Matrix runs: a spec of vLLM launch profiles and workloads, run step by step on the host over
SSH as a campaign that outlives the host's freezes and reboots and the collector's restarts,
with reports that compare the profiles across their repetitions.

Imports liveness (planned reboots), ingest (the server's log lines), remote, hosts, kernel,
vllm and the base modules. It reads incidents and host status and notes on an incident what
the campaign did (the unit it cut short, power cycles); it never opens, resolves or moves them.
"""
