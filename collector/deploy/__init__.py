"""Getting the agent onto a GPU host: the single-file zipapp built from this collector.

Imports nothing from the collector.
"""
