"""A silence of a host: opened with its last-gasp snapshot, resolved from the evidence the
host brings back, told in alerts, read back with its post-mortem artifacts.

Imports alerts, readback, hosts, remote and the base modules; liveness drives it.
"""
