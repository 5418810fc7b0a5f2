"""Fixtures of the Slack emulator's tests: an emulator, what it saw, a bare client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from slack_sdk import WebClient

from lab.slack import SlackEmulator
from tests.lab.slack.helpers import TOKEN


@pytest.fixture
def seen() -> list[dict[str, Any]]:
    return []


@pytest.fixture
def emulator(seen: list[dict[str, Any]]) -> Iterator[SlackEmulator]:
    with SlackEmulator(token=TOKEN, channels=("#alerts", "ops"), on_message=seen.append) as emu:
        yield emu


@pytest.fixture
def client(emulator: SlackEmulator) -> WebClient:
    # No retry handlers at all: each test adds the ones it exercises.
    return WebClient(token=TOKEN, base_url=emulator.base_url, retry_handlers=[])
