"""The JSON API: thin routes that parse, call one domain function and return its answer.

Imports the domains and deps; nothing below imports it.
"""
