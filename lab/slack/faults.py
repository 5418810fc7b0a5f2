"""Fault injection: refused requests, lost answers and outages, in the shapes clients meet.

A request is refused before anything happened, or carried out and then answered with an
error, too late or not at all (``after_store``); an outage refuses every request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lab.slack.workspace import _error, _Reply


@dataclass
class _Fault:
    remaining: int
    status: int
    retry_after: int | None
    path_prefix: str
    #: Carry the request out first, then fail: the client cannot tell it happened.
    after_store: bool = False
    #: A stall instead of an error status: the answer comes this late (the status is
    #: the real one after a store, 504 otherwise).
    stall_s: float = 0.0
    #: No answer at all: the connection is closed once the request is read.
    cut: bool = False

    @property
    def name(self) -> str:
        kind = "stall" if self.stall_s else "cut" if self.cut else "fail"
        return f"{kind}_after_store" if self.after_store else kind


class _Faults:
    """The faults waiting for their requests, first added first used, and the outage switch.

    Not thread-safe: the emulator holds its lock around every call.
    """

    def __init__(self) -> None:
        self._pending: list[_Fault] = []
        #: While set, every request is answered HTTP 503.
        self.down = False

    def add(self, fault: _Fault) -> None:
        """Queue ``fault`` for the next ``fault.remaining`` requests it matches."""
        self._pending.append(fault)

    def route(self, path: str, serve: Callable[[], _Reply]) -> tuple[_Reply, str | None]:
        """The answer to a request for ``path``, and the name of the fault that shaped it.

        Args:
            path: The request's path, matched against each fault's prefix.
            serve: Carries the request out and returns the real answer.

        Returns:
            The answer, and the fault's name (None: no fault, ``serve``'s own answer).
        """
        if self.down:
            return _Reply.text("service unavailable (emulated outage)", 503), "down"
        fault = next((f for f in self._pending if path.startswith(f.path_prefix)), None)
        if fault is None:
            return serve(), None
        fault.remaining -= 1
        if fault.remaining <= 0:
            self._pending.remove(fault)
        # After a store the request is carried out as usual, and its answer replaced
        # (or delayed): the client cannot tell that it happened.
        done = serve() if fault.after_store else None
        if fault.stall_s:
            late = done or _Reply.text("emulated stall", 504)
            late.stall_s = fault.stall_s
            return late, fault.name
        if fault.cut:
            return _Reply(fault.status, b"", "text/plain", cut=True), fault.name
        headers = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
        if fault.status == 429:
            return _Reply.json(_error("ratelimited"), 429, headers), fault.name
        failed = _Reply.text(f"emulated failure: HTTP {fault.status}", fault.status, headers)
        return failed, fault.name
