"""PLACEHOLDER entry point (replaced by the real agent CLI at merge): parses --help only."""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="freezewatch-agent", description="freezewatch host agent (placeholder CLI)"
    )
    parser.parse_args(argv)
    return 0
