"""The agent's guard as the collector sees it: each host's reported rules and state, its
firings raised as ``guard.fired`` alerts, and pushing a rules file to a host over SSH.

Imports models, alerts, readback, hosts and remote; the rules themselves are read with the
agent's own parser (``agent.guard.rules``), so what the collector accepts the agent runs.
"""
