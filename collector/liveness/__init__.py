"""Is the host alive? Heartbeats in, the status state machine, the checker's sweep with its
probes, and the collector's own lifetimes.

Imports incidents, remote, hosts and the base modules.
"""
