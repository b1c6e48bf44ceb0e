"""Matrix runs: a spec of vLLM launch profiles and workloads, run step by step on the host over
SSH, with reports that compare the profiles.

Imports ingest (the server's log lines), remote, hosts, kernel, vllm and the base modules.
"""
