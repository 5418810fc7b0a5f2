"""``python -m streaming.cli``: the ``flinkwatch`` command from a checkout."""

import sys

from streaming.cli import main

sys.exit(main())
