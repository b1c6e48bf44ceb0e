import sys

from collector.cli import main

sys.exit(main())
