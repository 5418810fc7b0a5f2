"""The Slack emulator the Slack sinks' tests post to."""

from __future__ import annotations

import pytest

from lab.slack import SlackEmulator
from tests.sinks.slack.helpers import TOKEN


@pytest.fixture
def slack():
    with SlackEmulator(token=TOKEN, channels=("#flink-alerts", "#flink-pager")) as emu:
        yield emu
