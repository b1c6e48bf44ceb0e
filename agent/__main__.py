"""``python -m agent`` (and the zipapp entry point)."""

import sys

from agent.cli import main

sys.exit(main())
