"""Live reload of the config file: poll its content (or take SIGHUP), validate, swap.

Kubernetes updates a mounted ConfigMap by swapping a symlink, which leaves the
file's own mtime unchanged, so the watcher compares content hashes, never mtimes.
A file that fails validation is reported (log + counters) and the running config
stays in force.

An editor or ``kubectl cp`` may be caught half way through a save, and a file cut
between two sections is still valid YAML and a valid config: it silently drops the
silences, routes or overrides that had not been written yet. So a changed file is
applied only when two consecutive reads (two polls, or two reads ``settle_s`` apart
after SIGHUP) find the same content, and a section that was there and is gone is
logged as a warning.

Each read takes at most :data:`conf.MAX_CONFIG_BYTES` from a regular file: a path that
points at ``/dev/zero``, a growing log or a FIFO is refused (once, naming the file)
without being read whole, and the running config stays.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from conf import AppConfig, ConfigError, load_config, read_config_file, restart_only

log = logging.getLogger(__name__)


def _restart_only_fields() -> tuple[tuple[str, str | None], ...]:
    """(section, field) of every setting marked :data:`conf.RESTART`; field None: all of it."""
    out: list[tuple[str, str | None]] = []
    for section, f in AppConfig.model_fields.items():
        if restart_only(f):
            out.append((section, None))
            continue
        model = f.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            out += [(section, name) for name, g in model.model_fields.items() if restart_only(g)]
    return tuple(out)


#: Settings that only take effect when flinkwatch itself restarts, from the models' marks.
RESTART_ONLY: tuple[tuple[str, str | None], ...] = _restart_only_fields()


def content_hash(text: bytes) -> str:
    """Short hash of a config file's bytes (the ``config hash`` in logs and metrics)."""
    return hashlib.sha256(text).hexdigest()[:12]


def outline(text: bytes) -> dict[str, int]:
    """The file's sections, with their entry counts: top-level keys and ``slack.routes``."""
    try:
        doc: Any = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    if not isinstance(doc, dict):
        return {}
    out = {str(k): len(v) if isinstance(v, dict | list) else 1 for k, v in doc.items()}
    slack = doc.get("slack")
    if isinstance(slack, dict) and isinstance(slack.get("routes"), list):
        out["slack.routes"] = len(slack["routes"])
    return out


@dataclass
class ReloadStats:
    """Outcome counters, exported as metrics by the delivery layer."""

    succeeded: int = 0
    failed: int = 0
    last_error: str | None = None
    active_hash: str = ""
    ignored_fields: list[str] = field(default_factory=list)


class ConfigWatcher:
    """Detects a changed config file and yields the new, validated config.

    Args:
        path: The config file (``None``: the packaged default, never reloaded).
        current: The config in force.
        transform: Applied to every loaded config before use (command-line overrides).
        settle_s: After SIGHUP, the pause between the two reads that must agree.
        sleep: Waits ``settle_s`` (injected in tests).
        fixed: The settings whose change is not applied (logged, the running value
            kept): the live job's :data:`RESTART_ONLY` by default.
    """

    def __init__(
        self,
        path: str | Path | None,
        current: AppConfig,
        transform: Callable[[AppConfig], AppConfig] = lambda c: c,
        settle_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        fixed: tuple[tuple[str, str | None], ...] = RESTART_ONLY,
    ) -> None:
        self.path = Path(path) if path else None
        self.fixed = fixed
        self.current = current
        self.transform = transform
        self.settle_s = settle_s
        self._sleep = sleep
        self.stats = ReloadStats()
        text = self._read()
        self._seen = content_hash(text) if isinstance(text, bytes) else ""
        self._outline = outline(text) if isinstance(text, bytes) else {}
        #: A changed content seen once, waiting for a second read to agree.
        self._settling: str | None = None
        #: Why the file was last refused unread, so that a poll reports it once.
        self._refused: str | None = None
        self.stats.active_hash = self._seen

    def _read(self) -> bytes | ConfigError | None:
        """The file's bytes; why it cannot be read (gone, too large, not a file); None: no file."""
        if self.path is None:
            return None
        try:
            return read_config_file(self.path)
        except ConfigError as exc:
            return exc

    def _settled(self, digest: str, force: bool) -> bool:
        """Whether ``digest`` was read twice in a row (a save is not caught half way)."""
        if force and digest != self._settling:
            self._settling = digest
            self._sleep(self.settle_s)
            text = self._read()
            digest = content_hash(text) if isinstance(text, bytes) else ""
        if digest == self._settling:
            self._settling = None
            return True
        log.info("config reload: %s changed; applied once the next read agrees", self.path)
        self._settling = digest
        return False

    def _say_vanished(self, new: dict[str, int]) -> None:
        for name, n in self._outline.items():
            if name not in new:
                log.warning(
                    "config reload: section %s (%d entr%s) is gone from %s; its defaults apply",
                    name,
                    n,
                    "y" if n == 1 else "ies",
                    self.path,
                )

    def poll(self, force: bool = False) -> AppConfig | None:
        """Return the new config when the file changed and is valid, else ``None``.

        Args:
            force: Re-read even if the content hash is unchanged (SIGHUP).
        """
        if self.path is None:
            return None
        text = self._read()
        if not isinstance(text, bytes):
            # Gone, unreadable, too large or not a file: reported once, not on every poll.
            if text is not None and str(text) != self._refused:
                self._refused = str(text)
                self._fail(f"{text}; keeping the running config")
            self._seen = ""
            return None
        self._refused = None
        digest = content_hash(text)
        if digest == self._seen and not force:
            self._settling = None
            return None
        if digest != self._seen and not self._settled(digest, force):
            return None
        self._seen = digest
        try:
            decoded = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            self._fail(f"{self.path}: not UTF-8 ({exc}); keeping the running config")
            return None
        try:
            new = self.transform(load_config(self.path, decoded))
        except ConfigError as exc:
            self._fail(f"{exc}; keeping the running config (hash {self.stats.active_hash})")
            return None
        merged, ignored = keep_restart_only(self.current, new, self.fixed)
        for name in ignored:
            log.warning(
                "config reload: %s changed in %s but only takes effect when flinkwatch "
                "restarts; keeping the running value",
                name,
                self.path,
            )
        self.stats.ignored_fields = ignored
        sections = outline(text)
        self._say_vanished(sections)
        self._outline = sections
        self.stats.succeeded += 1
        self.stats.last_error = None
        self.stats.active_hash = digest
        if merged == self.current:
            log.info("config reload: %s re-read (hash %s), nothing to apply", self.path, digest)
            return None
        log.info("config reload: %s valid (hash %s); applying", self.path, digest)
        self.current = merged
        return merged

    def _fail(self, message: str) -> None:
        self.stats.failed += 1
        self.stats.last_error = message
        log.error("config reload rejected: %s", message)


def keep_restart_only(
    current: AppConfig,
    new: AppConfig,
    fields: tuple[tuple[str, str | None], ...] = RESTART_ONLY,
) -> tuple[AppConfig, list[str]]:
    """``new`` with ``current``'s values of ``fields``; also the names that differed."""
    ignored: list[str] = []
    updates: dict[str, object] = {}
    for section, name in fields:
        cur_sec, new_sec = getattr(current, section), getattr(new, section)
        if name is None:
            if cur_sec != new_sec:
                ignored.append(section)
                updates[section] = cur_sec
            continue
        if getattr(cur_sec, name) != getattr(new_sec, name):
            ignored.append(f"{section}.{name}")
            base = updates.get(section, new_sec)
            updates[section] = base.model_copy(update={name: getattr(cur_sec, name)})  # type: ignore[attr-defined]
    return (new.model_copy(update=updates) if updates else new), ignored
