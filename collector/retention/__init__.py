"""Retention: how long each kind of a host's data is kept, the pruning that enforces it in
small background batches, and the disk each host and kind uses. Imports the models, ``db`` and
the settings only."""
