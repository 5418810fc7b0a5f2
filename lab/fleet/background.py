"""A job's background of WARN and ERROR lines, and the ``new_error`` incident.

Real healthy runs log WARN and ERROR lines a detector must learn to ignore. The healthy
Flink 2.3 runs in ``tests/data/real`` log only WARN lines of the processes, none naming a
job: the RPC system's remoting dropping an association (``Association with remote system
[pekko.tcp://flink@host:6123] has failed, address is now gated for [50] ms. Reason:
[Disassociated]``), the delegation tokens, the MAC address at start. Production jobs add
their own code's lines: a decoder that drops a malformed record and says so, at ERROR,
every few minutes, each time with another offset. So every simulated job has, from its
own generator (its other records stay the same as without it):

* on each TaskManager, now and then (every 20-90 minutes), the remoting's WARN
  (``akka`` before 1.18, ``pekko`` from 1.18): a process line, no job in it;
* on two jobs of three, its decoder's ERROR on a source subtask's task thread, first a
  few seconds after the job starts (the backlog it catches up on has a bad record or
  two), then every 1-10 minutes, with the record's offset and partition; the reason is
  the job's own, one of a few, with its exception class on the next line.

Both are repetitive and rare (a few lines per job-hour among ~1,500). In Flink's text
layouts neither names the job; in a JSON layout on 1.19+ the decoder's lines carry the
job id in the MDC (:data:`~lab.fleet.wording.PROCESS_SITES`), so a job detector sees them.

``new_error`` (an :class:`~lab.fleet.spec.Incident`): from its onset, the job's lookup
of reference data in a remote service fails, every 5-40 s on a random source subtask,
with the key it looked up and a ``SocketTimeoutException``; the job keeps running. Only
a JSON layout on 1.19+ names the job in those lines (as above).
"""

from __future__ import annotations

import random

from lab.fleet.identity import Identity
from lab.fleet.records import Records
from lab.fleet.spec import FleetSpec
from lab.fleet.state import Agenda, RunState

#: (why a record is dropped, the exception the decoder logs under it): one per job.
DROP_REASONS: tuple[tuple[str, str], ...] = (
    (
        "field 'amount' is not a number",
        'java.lang.NumberFormatException: For input string: "n/a"',
    ),
    (
        "unexpected end of input",
        "com.fasterxml.jackson.core.io.JsonEOFException: Unexpected end-of-input in VALUE_STRING",
    ),
    (
        "unknown schema id",
        "org.apache.avro.AvroRuntimeException: Unknown schema id in message header",
    ),
)
LOOKUP_TRACE = (
    "java.net.SocketTimeoutException: Read timed out\n"
    "\tat com.example.pipeline.ReferenceClient.get(ReferenceClient.java:141)\n"
    "\tat com.example.pipeline.ReferenceLookup.processElement(ReferenceLookup.java:88)"
)


class Background:
    """The background lines of one job, and its ``new_error`` incident, on its agenda."""

    def __init__(
        self,
        identity: Identity,
        records: Records,
        state: RunState,
        agenda: Agenda,
        onsets: dict[str, int],
        end_ms: int,
    ) -> None:
        """Plan every background line of the job ``identity`` names, until ``end_ms``."""
        spec: FleetSpec = identity.spec
        self._id = identity
        self._records = records
        self._state = state
        self._rng = rng = random.Random(f"{spec.seed}/background/{identity.index}")
        start = state.running_ms
        for k in range(spec.tms_per_job):
            t = start + rng.randrange(1_200_000, 5_400_000)
            while t < end_ms:
                agenda.at(t, lambda t=t, k=k: self._remote_gated(t, k))
                t += rng.randrange(1_200_000, 5_400_000)
        if rng.random() < 2 / 3:
            reason = rng.choice(DROP_REASONS)
            t = start + rng.randrange(5_000, 40_000)
            while t < end_ms:
                agenda.at(t, lambda t=t: self._drop(t, reason))
                t += rng.randrange(60_000, 600_000)
        onset = onsets.get("new_error")
        if onset is not None:
            irng = random.Random(f"{spec.seed}/new_error/{identity.index}")
            t = onset
            while t < end_ms:
                key = irng.randrange(10**6)
                agenda.at(t, lambda t=t, key=key: self._lookup_failed(t, key))
                t += irng.randrange(5_000, 40_000)

    def _task_thread(self, k: int) -> str:
        ident = self._id
        n = ident.spec.tms_per_job
        return f"{ident.main_source} -> Map ({k + 1}/{n}){self._state.attempt_suffix()}"

    def _remote_gated(self, t: int, k: int) -> None:
        ident, state = self._id, self._state
        tm = state.slots[k]
        scheme = "pekko" if ident.wording.pekko else "akka"
        self._records.log(
            t,
            "remote_gated",
            "WARN",
            f"Association with remote system [{scheme}.tcp://flink@{ident.jm_host}:6123] has "
            "failed, address is now gated for [50] ms. Reason: [Disassociated] ",
            f"flink-{scheme}.actor.default-dispatcher-{self._rng.randrange(2, 30)}",
            tm=tm,
        )

    def _drop(self, t: int, reason: tuple[str, str]) -> None:
        state = self._state
        if not state.tasks_running:
            return  # the tasks are not running: nothing is decoded
        rng = self._rng
        k = rng.randrange(self._id.spec.tms_per_job)
        why, exc = reason
        self._records.log(
            t,
            "user_drop",
            "ERROR",
            f"Dropping record at offset {rng.randrange(10**9)} of partition "
            f"{self._id.main_source.removeprefix('Source: kafka-')}-{k}: {why}",
            self._task_thread(k),
            exc,
            tm=state.slots[k],
        )

    def _lookup_failed(self, t: int, key: int) -> None:
        state = self._state
        if not state.tasks_running:
            return
        k = key % self._id.spec.tms_per_job
        self._records.log(
            t,
            "user_lookup",
            "ERROR",
            f"Lookup of key {key} in the reference service failed after 3 retries",
            self._task_thread(k),
            LOOKUP_TRACE,
            tm=state.slots[k],
        )
