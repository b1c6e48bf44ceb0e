"""Hosts: registration, tokens, boots, and how the collector reaches each one.

Imports only the base modules (models, schemas, db, auth, errors, timeutil).
"""
