"""Getting the agent onto a GPU host: the single-file zipapp built from this collector, and its
install, upgrade and removal over the host's SSH settings (``deploy-agent``).

Uses the SSH layer (``remote``), the host registry and the netconsole settings below it.
"""
