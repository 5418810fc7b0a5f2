"""``flinkwatch explain``: where each detector stands for one entity, in its own words.

"Why did it not page?" is answered from the entity's saved value, the one the runner keeps
between micro-batches (:mod:`streaming.entity`: a header, then each detector's state as
JSON on a line). For the entity asked (``--job`` by id or name, ``--tm`` by id, or the
cluster), every detector of its scope has one line: whether its incident is open, when it
is due next, and what the detector says of the state it holds, or, holding none, why it
cannot judge (:meth:`Detector.standing`). Detectors turned off for the job say so.

Pure Python, no Spark: the saved values come from a replay's end state
(:func:`streaming.replay.replay` with ``explain=``) or from the running job's detect query
state (:mod:`streaming.explain_state`), and :class:`Asked` picks them in both places.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from conf import AppConfig, ParamsResolver
from detectors import Detector
from detectors.base import DetectorState, Incident
from detectors.model import StateError
from detectors.tm_ids import tm_entity
from streaming.entity import Header, parse_saved
from streaming.routes import scope_of

#: A Flink job id: 32 hex digits.
_JOB_ID = re.compile(r"[0-9a-f]{32}")


class Asked(BaseModel):
    """Which entity is asked about: a job by id or name, a TaskManager by id, or the cluster.

    Picklable and pure: the replay's shards keep only the entities it matches, and the
    live endpoint reads it from the query string.

    Example:
        >>> Asked(job="wordcount").matches("job:7f", '{"v":2,"t":1,"name":"wordcount"}')
        True
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    job: str | None = None
    tm: str | None = None
    cluster: bool = False

    @model_validator(mode="after")
    def _one(self) -> Asked:
        if sum((self.job is not None, self.tm is not None, self.cluster)) != 1:
            msg = "ask about one entity: a job (id or name), a TaskManager id, or the cluster"
            raise ValueError(msg)
        return self

    @property
    def what(self) -> str:
        """The question in words: ``job wordcount``, ``TaskManager tm-1``, ``the cluster``."""
        if self.job is not None:
            return f"job {self.job}"
        return f"TaskManager {self.tm}" if self.tm is not None else "the cluster"

    def matches(self, entity: str, text: str | None) -> bool:
        """Whether the saved entity is the one asked (a job also by the name it carries)."""
        if self.cluster:
            return entity == "cluster"
        if self.tm is not None:
            return entity == tm_entity(self.tm)  # asked in any spelling of its id
        if not entity.startswith("job:"):
            return False
        return entity == f"job:{self.job}" or self.job in _names(text)


def _names(text: str | None) -> set[str]:
    """The job names a saved job entity carries: its header's, and its states'."""
    if not text:
        return set()
    try:
        header, texts = parse_saved(text)
    except (ValueError, TypeError, AttributeError):
        return set()
    names = {header.name} if header.name else set()
    for body in texts.values():
        # The field as every state has it, without loading the detector's model.
        found = re.search(r'"job_name":"((?:[^"\\]|\\.)*)"', body)
        if found:
            names.add(json.loads(f'"{found.group(1)}"'))
    return names


class Standing(BaseModel):
    """One detector's line about one entity.

    Attributes:
        detector: Its name.
        enabled: Whether it runs for this entity (a per-job override may turn it off).
        holds: Whether it holds state for the entity.
        firing: Whether an incident of it is open for the entity.
        due_ms: Its next deadline (event time), when it holds state.
        words: Where it stands, in its own words, or why it cannot judge.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    detector: str
    enabled: bool = True
    holds: bool = False
    firing: bool = False
    due_ms: int | None = None
    words: str


class EntityStanding(BaseModel):
    """Every detector of one entity's scope, and what the runner knows of the entity.

    Attributes:
        entity: ``job:<id>``, ``tm:<id>`` or ``cluster``.
        name: The job's name, or the TaskManager's id as its logs spell it, when known.
        newest_ms: The entity's newest event time (``None``: nothing saved for it).
        behind_ms: How far behind the bus's newest time its records arrive, lately (what
            its deadlines wait for beside ``spark.deadline_grace_s``: see
            :class:`~streaming.clock.Lag`); ``None``: not known (a replay's files).
        to_bus_ms: How long its records take from their event time to the bus, lately.
        detectors: One line per detector of its scope, by name.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    entity: str
    name: str | None = None
    newest_ms: int | None = None
    behind_ms: int | None = None
    to_bus_ms: int | None = None
    detectors: tuple[Standing, ...]


class Explanation(BaseModel):
    """The answer: the entities that match the question, and a note when it needs one.

    Attributes:
        asked: The question.
        entities: The matching entities (several jobs may share a name).
        note: A name that matches several jobs, or nothing saved for the entity.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    asked: Asked
    entities: tuple[EntityStanding, ...]
    note: str | None = None


def detector_catalog(cfg: AppConfig) -> Mapping[str, type[Detector[Any, Any]]]:
    """The detectors a config runs, by name (its rules beside the built-in detectors)."""
    return cfg.catalog()


def explain(asked: Asked, saved: Mapping[str, str], cfg: AppConfig) -> Explanation:
    """Each detector's standing for the entities of ``saved`` that ``asked`` matches.

    ``saved`` is entity → saved value (a shard's entities, as the runner keeps them);
    entities the question does not match are ignored. A job or TaskManager id with
    nothing saved is still answered, every detector holding nothing.
    """
    found = sorted(e for e, text in saved.items() if asked.matches(e, text))
    catalog, resolver = detector_catalog(cfg), cfg.resolver()
    note = None
    if not found:
        entity = _entity_of(asked)
        if entity is None:
            note = f"no job named {asked.job}: flinkwatch holds nothing under that name"
            return Explanation(asked=asked, entities=(), note=note)
        found = [entity]
        note = (
            f"flinkwatch holds nothing for {asked.what}: none of its events seen, "
            "or it went idle and was dropped"
        )
    elif len(found) > 1:
        note = f"{len(found)} jobs are named {asked.job}"
    entities = tuple(_entity(e, saved.get(e), catalog, resolver) for e in found)
    return Explanation(asked=asked, entities=entities, note=note)


def _entity_of(asked: Asked) -> str | None:
    """The entity an unmatched question still names (an id), ``None`` for a name."""
    if asked.cluster:
        return "cluster"
    if asked.tm is not None:
        return tm_entity(asked.tm)
    return f"job:{asked.job}" if _JOB_ID.fullmatch(asked.job or "") else None


def _entity(
    entity: str,
    text: str | None,
    catalog: Mapping[str, type[Detector[Any, Any]]],
    resolver: ParamsResolver,
) -> EntityStanding:
    try:
        header, texts = parse_saved(text)
    except (ValueError, TypeError, AttributeError):
        header, texts = Header(), {}
    scope = scope_of(entity)
    job_id = entity.removeprefix("job:") if scope == "job" else None
    lines = []
    for name in sorted(n for n, cls in catalog.items() if cls.scope == scope):
        lines.append(_standing(name, catalog[name], texts.get(name), header, job_id, resolver))
    lag = header.lag_ms()
    return EntityStanding(
        entity=entity,
        # A TaskManager is shown as its logs spell it (the entity's key is folded).
        name=header.tm if scope == "tm" else header.name,
        newest_ms=header.newest_ms or None,
        behind_ms=None if lag is None else max(lag.frontier_ms, 0),
        to_bus_ms=None if lag is None else max(lag.bus_ms, 0),
        detectors=tuple(lines),
    )


def _standing(
    name: str,
    cls: type[Detector[Any, Any]],
    text: str | None,
    header: Header,
    job_id: str | None,
    resolver: ParamsResolver,
) -> Standing:
    state: DetectorState | None = None
    if text:
        try:
            state = cls.load_json(text)
        except StateError as exc:
            return Standing(
                detector=name, holds=True, words=f"its saved state cannot be read: {exc}"
            )
        if header.name and not state.job_name:
            state.job_name = header.name  # as the runner gives it (its job_state lines)
    job_name = (state.job_name if state else None) or header.name
    params = resolver.params(name, job_id, job_name) if name in resolver.base else None
    if params is None or not params.enabled:
        where = "for this job" if params is not None and job_id else "in the config"
        words = f"turned off {where} (detectors.{name}.enabled: false)"
        return Standing(detector=name, enabled=False, holds=state is not None, words=words)
    det = cls(params)
    return Standing(
        detector=name,
        holds=state is not None,
        firing=state is not None and _open(state),
        due_ms=header.due.get(name) if state is not None else None,
        words=det.standing(state),
    )


def _open(state: DetectorState) -> bool:
    """Whether the state holds an open incident: its own, or one of those it keys."""
    if state.firing:
        return True
    for value in state.__dict__.values():
        inner: Iterable[Any] = (
            value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        )
        if any(isinstance(v, Incident) and v.firing for v in inner):
            return True
    return False


# Output ---------------------------------------------------------------------------------


def _iso(ms: int) -> str:
    t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _lag(ent: EntityStanding) -> str:
    """How late the entity's records arrive: why its deadlines are judged when they are."""
    if ent.behind_ms is None or ent.to_bus_ms is None:
        return ""
    return (
        f"; its records arrive {ent.behind_ms / 1000:.1f} s behind the bus's newest"
        f" ({ent.to_bus_ms / 1000:.1f} s after their event time)"
    )


def render(expl: Explanation) -> str:
    """The explanation as aligned text, one block per entity, one line per detector."""
    out: list[str] = []
    if expl.note:
        out.append(f"{expl.note}.")
    for ent in expl.entities:
        who = ent.entity + (f" ({ent.name})" if ent.name else "")
        newest = f", newest event {_iso(ent.newest_ms)}" if ent.newest_ms else ""
        out.append(f"{who}{newest}{_lag(ent)}")
        width = max((len(s.detector) for s in ent.detectors), default=0)
        for s in ent.detectors:
            state = "off" if not s.enabled else "FIRING" if s.firing else "ok" if s.holds else "-"
            # The column says FIRING already; the detector's own words start with it too.
            words = s.words.removeprefix("FIRING ") if s.firing else s.words
            out.append(f"  {s.detector:<{width}}  {state:<6}  {words}")
    return "\n".join(out)
