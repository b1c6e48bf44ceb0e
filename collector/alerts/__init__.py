"""Alert delivery: the outbox (finished payloads, one row per event and target), the signed
webhook sender, and the targets.

Knows no incident or kernel event: the domains above build the payloads. Imports only base
modules.
"""
