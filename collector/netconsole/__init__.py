"""The kernel's own UDP stream: receive, store raw, parse and reassemble, count losses,
store as lines (merged with the agent's copies), and each channel's health.

Imports ingest (row builders), kernel, hosts and the base modules.
"""
