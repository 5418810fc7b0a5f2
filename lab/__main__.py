"""``python -m lab``: simulate, demo, slack-emulator."""

import sys

from lab.cli import main

sys.exit(main())
