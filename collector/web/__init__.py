"""The HTML pages and their templates: thin routes over the same domain functions as the API.

Imports the domains and deps; nothing below imports it.
"""
