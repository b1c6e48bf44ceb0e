"""freezewatch host agent: streams kernel lines and host samples to the collector."""

__version__ = "0.1.0"
