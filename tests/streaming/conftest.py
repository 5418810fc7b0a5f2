"""What the tests of ``streaming/`` and ``streaming/cli/`` share."""

from __future__ import annotations

import pytest


@pytest.fixture
def keep_signal_handlers():
    """`run` installs its own SIGTERM/SIGINT/SIGHUP handlers; put pytest's back."""
    import signal

    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)
