"""Reaching a host on our own: SSH with pinned host keys, argv-exact commands in killable
process groups, port forwards, and the probes of a silent host.

Imports only the base modules (models, errors, settings); everything above takes an
``SSHClient`` as a dependency.
"""
