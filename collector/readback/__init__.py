"""Reading time series back for people and charts: samples and lines by range and cursor,
bucketed series and rollups, everything the host timeline draws.

Reads the models directly; imports no other domain.
"""
