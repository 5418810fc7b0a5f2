"""``spark-submit`` entry point of the image: ``main.py run --config FILE`` is ``flinkwatch run``.

spark-submit (and the Spark operator, which calls it) starts a Python file, not a console
script; the image installs this file as ``/opt/flinkwatch/main.py``.
"""

import sys

from streaming.cli import main

if __name__ == "__main__":
    sys.exit(main())
