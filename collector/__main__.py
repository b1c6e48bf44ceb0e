import sys

from collector.cli import main

if __name__ == "__main__":  # a spawned worker may import the main module again: not the CLI
    sys.exit(main())
