"""``python -m collector`` and the ``freezewatch-collector`` script: the CLI, its imports (seconds
on a slow machine) inside the Ctrl-C guard so an early Ctrl-C ends quietly, not in a traceback."""

import sys


def run() -> int:
    try:
        from collector.cli import main
    except KeyboardInterrupt:
        return 130
    return main()


if __name__ == "__main__":  # a spawned worker may import the main module again: not the CLI
    sys.exit(run())
