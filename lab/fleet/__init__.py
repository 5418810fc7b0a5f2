"""A simulated Flink fleet: healthy jobs plus injected incidents, as Kafka records.

:func:`generate` is a pure, seeded generator: the same :class:`FleetSpec` and start
time give the same records, byte for byte, and it never reads the clock.
:func:`produce` sends records to Kafka with kafka-python, optionally paced in real
time.

Wording follows ``FLINK_FORMATS.md`` (per Flink version) and metric names and
labels follow ``FLINK_METRICS.md``. What the fleet looks like, for job ``i``:

* **Version** ``flink_versions[i % len(flink_versions)]``: decides the wording and
  the log4j generation (1.x ≤ 1.10: log4j 1, ``<logger>  - msg``; ≥ 1.11: log4j 2,
  ``<logger> [] - msg``).
* **Log layout** by ``i % 4``: 0 and 2 Flink's default pattern layout; 1 the JSON
  pattern layout of seed 000 (a stack trace follows the JSON object as plain lines,
  exactly as log4j prints a throwable after a pattern layout); 3 the default layout
  wrapped in a Fluent Bit envelope.
* **Deployment** by ``i % 4``: 0 and 1 on YARN (TaskManager ids are container ids),
  2 and 3 on Kubernetes (TaskManager ids are pod names).
* **Metric format** by ``i % 4``: 2 sends Telegraf JSON, the others canonical JSON.
* **Graph**: two Kafka sources and a keyed co-process into a Kafka sink. Parallelism
  is ``tms_per_job``; subtask ``k`` of every vertex runs on TaskManager ``k``.

* **Metrics** every ``metric_interval_s``: per TaskManager heap used/max (a GC
  sawtooth over a flat floor while busy) and G1 young-generation count/time; per
  subtask ``numRecordsIn``/``numRecordsOut`` and their ``PerSecond`` rates; per job
  the last checkpoint's duration and size and the completed/failed counts.

Every job starts at ``start_ms`` plus a few seconds (its tasks are deployed and
switch to RUNNING), then checkpoints every ``checkpoint_interval_s``. The fleet is
assumed to tolerate checkpoint failures (``tolerable-failed-checkpoints`` high), so
a checkpoint incident keeps going instead of failing the job over. Incidents that
lose a process do fail it over, and the job recovers as Flink's does: region
failover (one region: the keyed exchanges connect every task), RUNNING -> RESTARTING
-> RUNNING after a 10 s fixed delay, the latest completed checkpoint restored, every
task redeployed with new attempt ids (a lost TaskManager replaced by the next
container or pod), checkpoint ids going on. Incidents (see :class:`Incident`) change a
job from their onset only: its records before the onset are the same as without them.
"""

from lab.fleet.ids import job_id, job_name, tm_id
from lab.fleet.job import generate
from lab.fleet.producer import ProduceError, produce
from lab.fleet.spec import INCIDENT_KINDS, FleetSpec, Incident, IncidentKind, SimRecord

__all__ = [
    "INCIDENT_KINDS",
    "FleetSpec",
    "Incident",
    "IncidentKind",
    "ProduceError",
    "SimRecord",
    "generate",
    "job_id",
    "job_name",
    "produce",
    "tm_id",
]
