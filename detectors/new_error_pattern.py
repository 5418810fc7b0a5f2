"""``new_error_pattern``: a job logs an ERROR it did not log while it was learning.

What it reads. The parser turns a WARN or ERROR line that no other rule classifies into
a ``log_warn`` or ``log_error`` event (a FATAL line counts as ERROR): the lines other
detectors own (checkpoint failures, task and job transitions, OutOfMemoryErrors, fatal
errors, heartbeat timeouts, watch errors, ...) never reach it, so it cannot page a
second time for them. Two kinds rather than one with a level field: the bus routes by
kind, so a detector that only wants ERROR lines would not be handed the WARN lines. The
event carries the message (cut by the parser), the first exception of the line or its
stack trace as ``reason``, and the job id where the line names one: the job's MDC in a
JSON layout (``flink-job-id``, Flink 1.19+), else the line's words (``for job J``,
``jobId: J``, never a bare 32-hex id, which in these lines is as often a JobMaster or
allocation id). A line naming no job has no entity and never reaches a job detector.
Measured on ``tests/data/real`` (``python -m bench.pattern_cost``): none of the WARN
lines of the real 2.3 runs that are left to it names a job (tokens, the MAC address,
Pekko associations: process lines); the TaskManager's task threads carry the MDC in the
ECS run. So in Flink's default text layout it sees mostly the JobManager's job lines;
with a JSON layout on 1.19+ the TaskManagers' task threads as well. It also reads
``job_state``, only so that a job's learning starts when the job does.

Templates. Each line is mined into the job's vocabulary by a small Drain of our own
(:mod:`detectors.drain`), keyed by level and exception class as well as by its words,
so the same sentence with a new exception is a new template. ``drain3`` (PyPI) does not
fit this state model: its state is one miner object persisted with ``jsonpickle`` (which
rebuilds arbitrary Python objects from the text: pickle's risk), it saves on a wall-clock
snapshot interval (``time.time``), and it holds one tree for every line it sees, where
here each job has its own bounded vocabulary that travels as plain JSON in the job's
state between micro-batches.

When it fires. From a job's first event, for ``learn_s`` (event time), every template
is learned (the warm-up of a fresh job, or of one flinkwatch just started watching,
is quiet). After that, an ERROR line whose template is not known counts; when one new
template has ``min_count`` lines within ``window_s``, the job's incident fires (severity
``warning``), naming the template, its exception class and one sample line as logged
(cut to ``_SAMPLE_CHARS``; the sinks escape it). A template pages once: it is known
from then on, and no time-based forgetting makes it new again (a rare but normal error,
say a daily one, would page every time it was forgotten). One incident per job at a
time: a new template that reaches the threshold while it is open joins its evidence
(``also``, ``max_listed`` of them, more counted), not a page of its own; the page's
sample is the line that made it. The incident
resolves once no line of its templates came for ``clear_for_s``. New WARN templates do
not page (``page_warnings``); the ones seen in the window before the page are listed as
context (``new_warnings``).

Correlation. An alert on a job that already has an open incident joins it (the
correlator links by job). ``causal_rank`` 4: below the known causes (a leak or growing
state 0, a dead JVM 1, a lost TaskManager or job 2, checkpoint trends 3), so it never
becomes the root over them, and above ``restart_storm`` (5): a new error and the
restarts that follow read as "the error, then the restarts".

Clocks. Lines are stamped with the job's clock (the latest event time seen): one that
arrives out of order counts as now, so a late line cannot reopen a window or extend the
learning. A job without events for ``idle_ttl_s`` (a week by default: the vocabulary is
what lets it stay quiet, and a quiet healthy job logs few of these lines) is forgotten.

State per job (:class:`NewErrorPatternState`): at most ``max_templates`` learned
templates and ``max_new`` new ones per level (ERROR, WARN), each of at most 40 tokens.
The rooms are apart so that noise cannot push out what matters: a new line never makes
a learned template go (only a newer learned one does: the least recently seen is
forgotten, counted in ``forgotten``), and a new template makes room only among the new
ones of its own level, the least recently seen first (counted in ``dropped``), so a
flood of new WARN lines never drops the count of a new ERROR template. Each new one
keeps at most ``min_count`` recent times, and each template of the open incident one
sample line: ~0.1-0.4 KB a template, under 1.5 KB for a job with a handful of templates,
at most ~25 KB with the defaults (50 + 2 x 10 templates of unique 40-token lines;
measured in ``tests/detectors/test_new_error_pattern.py``).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from detectors import words
from detectors.base import Detector, DetectorParams, DetectorState, Evidence, Member, Profile, Story
from detectors.drain import Template, Templates, tokens
from detectors.model import Alert, Event

_SAMPLE_CHARS = 300  # a sample line (and its exception line) is cut to this
_EXC_CHARS = 120  # an exception class name is cut to this
_SHOWN_CHARS = 200  # a template in a summary or headline is cut to this
_MAX_WARNINGS = 3  # new WARN templates listed as context
_LEVELS = {"log_error": "ERROR", "log_warn": "WARN"}
_EXCEPTION = re.compile(r"(?:Caused by: )?([\w$]+(?:\.[\w$]+)*(?:Exception|Error|Throwable))\b")


def exception_class(reason: str | None) -> str | None:
    """The exception class of an event's ``reason`` (``pkg.SomeException: text``), if any.

    Example:
        >>> exception_class("java.io.IOException: Broken pipe")
        'java.io.IOException'
        >>> exception_class("Checkpoint expired") is None
        True
    """
    m = _EXCEPTION.match(reason or "")
    return m[1][:_EXC_CHARS] if m else None


def shown(level: str, text: str, exc: str | None) -> str:
    """A template as a person reads it: ``ERROR <text> [<exception>]``, cut."""
    body = text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"
    return f"{level} {body}" + (f" [{exc}]" if exc else "")


class NewErrorPatternParams(DetectorParams):
    """Parameters of :class:`NewErrorPattern`."""

    learn_s: float = Field(default=1800, ge=0)
    """How long from a job's first event every template counts as normal (the warm-up; event-time
    seconds)."""
    min_count: int = Field(default=3, ge=1)
    """Lines of one new ERROR template within window_s that page."""
    window_s: float = Field(default=600, gt=0)
    """How long a line of a new template counts towards min_count (event-time seconds)."""
    clear_for_s: float = Field(default=1800, ge=0)
    """The incident resolves once no line of its templates came for this long (event-time
    seconds)."""
    page_warnings: bool = Field(default=False)
    """New WARN templates page too (noisier); otherwise they are only listed as context."""
    max_templates: int = Field(default=50, ge=1, le=1000)
    """Templates a job learned (in its warm-up, or by paging once) that its vocabulary holds;
    past it the least recently seen learned one is forgotten, counted. New lines never push
    one out: they have room of their own (max_new)."""
    max_new: int = Field(default=10, ge=1, le=100)
    """New templates (not learned, counting towards min_count) a job holds per level (ERROR,
    WARN), beside the learned ones; past it the least recently seen new one of that level is
    dropped, counted. So WARN noise never drops a new ERROR template's count."""
    max_listed: int = Field(default=5, ge=1, le=50)
    """New templates one incident lists (the first names the page); more are counted."""
    similarity: float = Field(default=0.6, gt=0, le=1)
    """Share of a template's tokens a line must share to join it (Drain's threshold)."""
    idle_ttl_s: float = Field(default=7 * 86400, gt=0)
    """Forget a job (its vocabulary too) after this long without events (seconds); an open
    incident is resolved then."""


class NewErrorPatternState(DetectorState):
    """What :class:`NewErrorPattern` keeps per job.

    Attributes:
        clock_ms: The latest event time seen (an earlier line is stamped so).
        learn_until_ms: Until when every template is learned.
        vocab: The job's templates.
        open_ids: The open incident's templates (the first named the page).
        unlisted: More templates that joined the open incident.
        last_open_ms: When a line of the open incident's templates last came.
    """

    clock_ms: int = 0
    learn_until_ms: int = 0
    vocab: Templates = Field(default_factory=Templates)
    open_ids: list[int] = []
    unlisted: int = 0
    last_open_ms: int | None = None


class NewErrorPatternEvidence(Evidence):
    """What a ``new_error_pattern`` alert shows.

    Attributes:
        template: The new template that paged (``ERROR <tokens> [<exception>]``).
        exception: Its exception class, when its lines carry one.
        sample: One of its lines as logged (first line, and its exception line), cut.
        count: Its lines so far.
        first_ms: When its first line came.
        last_ms: When its latest line came.
        also: Other new templates that joined the incident.
        unlisted: More that joined, not listed.
        new_warnings: New WARN templates seen in the window before the page.
        templates: Templates the job's vocabulary holds.
        dropped: New templates their level's room dropped so far (``max_new``): each was
            dropped with its count, so a new error among them may have gone unpaged.
        forgotten: Learned templates forgotten so far (``max_templates``): each pages again
            if it comes back after learning.
    """

    template: str | None = None
    exception: str | None = None
    sample: str | None = None
    count: int = 0
    first_ms: int | None = None
    last_ms: int | None = None
    also: tuple[str, ...] = ()
    unlisted: int = 0
    new_warnings: tuple[str, ...] = ()
    templates: int = 0
    dropped: int = 0
    forgotten: int = 0


def _sample(event: Event) -> str:
    """The line as logged: its first line, and its exception line when that is another."""
    first = (event.message or "").partition("\n")[0][:_SAMPLE_CHARS]
    exc = (event.reason or "")[:_SAMPLE_CHARS]
    return f"{first}\n{exc}" if exc and exc not in first else first


def _level_of(key: str) -> str:
    """The level of a vocabulary leaf key (``E|…`` or ``W|…``)."""
    return "ERROR" if key.startswith("E|") else "WARN"


def _headline(story: Story) -> str:
    """``job NAME logs a new ERROR: <template>``."""
    root = story.root
    who = root.job_name or root.job_id or "a job"
    what = root.evidence.get("template") or root.summary
    return f"job {who} logs a new {what}"


def _aftermath(member: Member) -> str | None:
    """``a new ERROR <template>``, after another detector's headline."""
    what = member.evidence.get("template")
    return f"a new {what}" if what else None


class NewErrorPattern(Detector[NewErrorPatternParams, NewErrorPatternState]):
    """Fire when a job logs a new ERROR template ``min_count`` times within ``window_s``."""

    name = "new_error_pattern"
    profile = Profile(
        runbook=(
            "The job logs an ERROR it did not log while flinkwatch learned it. Read the template "
            "and the sample line (the exception class names the failing part) and look at what "
            "changed around first_ms: a deploy, an upstream system, the input data. If the job is "
            "otherwise fine and the error harmless, nothing more is needed: the template is now "
            "part of the job's normal vocabulary and will not page again."
        ),
        idle_words="no log lines any more",
        causal_rank=4,
        headline=_headline,
        aftermath=_aftermath,
    )
    scope = "job"
    kinds = frozenset({"log_warn", "log_error", "job_state"})

    def new_state(self, event: Event, **fields: Any) -> NewErrorPatternState | None:
        """A job's first event: its clock and its learning start."""
        learn_until = event.time_ms + int(self.params.learn_s * 1000)
        return super().new_state(
            event, clock_ms=event.time_ms, learn_until_ms=learn_until, **fields
        )

    def on_event(self, state: NewErrorPatternState, event: Event) -> list[Alert]:
        """Mine a WARN or ERROR line; fire when a new ERROR template reaches ``min_count``."""
        at = state.clock_ms = max(state.clock_ms, event.time_ms)
        level = _LEVELS.get(event.kind)
        if level is None:
            return []  # a job state line: it only started the clock
        exc = exception_class(event.reason)
        toks = tokens(event.message or "")
        p = self.params
        learning = at < state.learn_until_ms
        tpl, _ = state.vocab.mine(
            f"{level[0]}|{exc or ''}",
            toks,
            at,
            similarity=p.similarity,
            new_cap=p.max_new,
            known_cap=p.max_templates,
            # New ERROR and WARN templates make room in pools of their own: a flood of new
            # warnings cannot push out the count of a new error, nor what the job learned.
            pool=f"{level[0]}|",
            learn=learning,
            keep=state.open_ids,
        )
        if learning:
            return []
        if tpl.known:
            if tpl.id in state.open_ids:
                state.last_open_ms = at
            return []
        if level == "WARN" and not p.page_warnings:
            return []  # kept as context, without counting
        recent = [t for t in tpl.hits if t > at - p.window_s * 1000]
        recent.append(at)
        if len(recent) < p.min_count:
            tpl.hits = recent[-(p.min_count - 1) :]
            return []
        # A template pages once: from now on it is part of the job's vocabulary. Its sample is
        # the line that paged (kept only while the incident is open: a flood of unique lines
        # leaves no text behind but the templates).
        state.vocab.learn(tpl, cap=p.max_templates, keep=state.open_ids)
        tpl.hits, tpl.sample = [], _sample(event)
        state.last_open_ms = at
        if state.firing:
            if len(state.open_ids) < p.max_listed:
                state.open_ids.append(tpl.id)
            else:
                state.unlisted += 1
            return []
        state.open_ids, state.unlisted = [tpl.id], 0
        summary = self._summary(state, shown(level, tpl.text, exc))
        return [self.fire(state, at, summary, self.evidence(state))]

    def on_timer(self, state: NewErrorPatternState, now_ms: int) -> list[Alert]:
        """Resolve once the open incident's templates have been quiet for ``clear_for_s``."""
        state.clock_ms = max(state.clock_ms, now_ms)
        due = self.next_deadline(state)
        if due is None or now_ms < due:
            return []
        return [self._resolved(state, now_ms)]

    def next_deadline(self, state: NewErrorPatternState) -> int | None:
        """When the open incident resolves if no line of its templates comes."""
        if not state.firing or state.last_open_ms is None:
            return None
        return state.last_open_ms + int(self.params.clear_for_s * 1000)

    def evidence(self, state: NewErrorPatternState) -> NewErrorPatternEvidence:
        """The open incident's templates, sample line and the job's vocabulary."""
        vocab = state.vocab
        found = [f for f in (self._find(state, i) for i in state.open_ids) if f is not None]
        if not found:
            return NewErrorPatternEvidence(
                templates=vocab.size, dropped=vocab.dropped, forgotten=vocab.forgotten
            )
        (key, tpl), others = found[0], found[1:]
        exc = key.split("|", 2)[1] or None
        since = tpl.first_ms - int(self.params.window_s * 1000)
        warnings = [
            shown("WARN", t.text, k.split("|", 2)[1] or None)
            for k, leaf in vocab.leaves.items()
            if k.startswith("W|")
            for t in leaf
            if not t.known and t.last_ms >= since
        ]
        return NewErrorPatternEvidence(
            template=shown(_level_of(key), tpl.text, exc),
            exception=exc,
            sample=tpl.sample,
            count=tpl.count,
            first_ms=tpl.first_ms,
            last_ms=tpl.last_ms,
            also=tuple(shown(_level_of(k), t.text, k.split("|", 2)[1] or None) for k, t in others),
            unlisted=state.unlisted,
            new_warnings=tuple(warnings[:_MAX_WARNINGS]),
            templates=vocab.size,
            dropped=vocab.dropped,
            forgotten=vocab.forgotten,
        )

    def standing(self, state: NewErrorPatternState | None) -> str:
        """Learning or alerting, the templates known, the new ERROR closest to paging."""
        if state is None:
            return "no WARN or ERROR line or state change of this job seen: learning not started"
        p, vocab, now = self.params, state.vocab, state.clock_ms
        known = sum(1 for t in vocab.all() if t.known)
        if now < state.learn_until_ms:
            left = words.span_ms(state.learn_until_ms - now)
            return (
                f"learning: {words.plural(known, 'template')} so far; every line is normal until "
                f"{words.at(state.learn_until_ms)} ({left} left)"
            )
        held = (
            f"alerting since {words.at(state.learn_until_ms)}, "
            f"{words.plural(known, 'template')} known"
        )
        horizon = now - p.window_s * 1000
        counting = [
            sum(1 for h in t.hits if h > horizon)
            for key, leaf in vocab.leaves.items()
            if key.startswith("E|")
            for t in leaf
            if not t.known
        ]
        new = (
            f"{words.plural(len(counting), 'new ERROR template')}, the closest at "
            f"{max(counting)} of {p.min_count} within {words.span(p.window_s)}"
            if counting
            else "no new ERROR template"
        )
        lost = f"{vocab.dropped} new ones dropped (room full)" if vocab.dropped else None
        if not state.firing:
            return words.clause(held, new, lost)
        found = self._find(state, state.open_ids[0]) if state.open_ids else None
        what = None
        if found is not None:
            key, tpl = found
            text = shown(_level_of(key), tpl.text, key.split("|", 2)[1] or None)
            what = f"new {text[:80]}{'…' if len(text) > 80 else ''} ({tpl.count} lines)"
        due = self.next_deadline(state)
        resolve = f"resolves at {words.at(due)} if it stays quiet" if due is not None else None
        return words.clause(words.firing_since(state.incident_start_ms, now), what, resolve)

    # --- helpers -----------------------------------------------------------------

    @staticmethod
    def _find(state: NewErrorPatternState, ident: int) -> tuple[str, Template] | None:
        for key, leaf in state.vocab.leaves.items():
            for t in leaf:
                if t.id == ident:
                    return key, t
        return None

    def _summary(self, state: NewErrorPatternState, what: str) -> str:
        minutes = self.params.window_s / 60
        return (
            f"{self.subject(state)} logs a new error, {self.params.min_count} times in "
            f"{minutes:g} min: {what}"
        )

    def _resolved(self, state: NewErrorPatternState, at: int) -> Alert:
        minutes = self.params.clear_for_s / 60
        summary = f"{self.subject(state)}: the new error quiet for {minutes:g} min"
        alert = self.resolve(state, at, summary, self.evidence(state))
        for ident in state.open_ids:
            found = self._find(state, ident)
            if found is not None:
                found[1].sample = None  # known now: its sample only served the incident
        state.open_ids, state.unlisted, state.last_open_ms = [], 0, None
        return alert
