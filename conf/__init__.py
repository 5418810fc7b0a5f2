"""flinkwatch configuration: frozen pydantic models loaded from YAML.

Loading is here (:func:`load_config`, :func:`read_config_file`); the models are in
their own modules and re-exported: the whole config and per-job overrides in
:mod:`conf.app`, ``output`` in :mod:`conf.output`, ``metrics`` in :mod:`conf.metrics`,
``kafka``, ``spark`` and ``parsing`` in :mod:`conf.pipeline`, ``slack``,
``alertmanager`` and ``webhooks`` in :mod:`conf.destinations`, what every section
shares in :mod:`conf.base`, the errors in :mod:`conf.errors`.

The detector section is derived from :data:`detectors.REGISTRY`: each detector's
parameters live in its own module, and an unknown detector name or parameter is
an error that names the field.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml
from pydantic import ValidationError

from conf.app import AppConfig as AppConfig
from conf.app import DetectorsConfig as DetectorsConfig
from conf.app import JobMatch as JobMatch
from conf.app import Override as Override
from conf.app import ParamsResolver as ParamsResolver
from conf.base import ENV_NAME as ENV_NAME
from conf.base import RESTART as RESTART
from conf.base import FrozenModel as FrozenModel
from conf.base import restart_only as restart_only
from conf.destinations import AlertmanagerConfig as AlertmanagerConfig
from conf.destinations import RouteMatch as RouteMatch
from conf.destinations import SlackConfig as SlackConfig
from conf.destinations import SlackRoute as SlackRoute
from conf.destinations import WebhookConfig as WebhookConfig
from conf.errors import ConfigError as ConfigError
from conf.errors import FlinkwatchError as FlinkwatchError
from conf.metrics import MetricsConfig as MetricsConfig
from conf.metrics import PushgatewayConfig as PushgatewayConfig
from conf.output import OutputConfig as OutputConfig
from conf.output import checkpoint_scheme as checkpoint_scheme
from conf.pipeline import KafkaConfig as KafkaConfig
from conf.pipeline import ParsingConfig as ParsingConfig
from conf.pipeline import SparkConfig as SparkConfig
from detectors.rules import KINDS as RULE_KINDS

DEFAULT_CONFIG = Path(__file__).with_name("flinkwatch.yaml")

#: The most a config file may hold (1 MiB; the shipped one is a few KB). The file is read
#: on the driver at start and at every reload poll: a path that points at ``/dev/zero``, a
#: log file or a FIFO must not be read whole, nor block the driver's loop.
MAX_CONFIG_BYTES = 1 << 20


def read_config_file(path: str | Path, limit: int = MAX_CONFIG_BYTES) -> bytes:
    """The bytes of a config file, read only if it is a regular file of at most ``limit`` bytes.

    A symlink is followed (Kubernetes mounts a ConfigMap as one). The file is opened
    without blocking and checked on the open descriptor, so a FIFO is refused rather than
    waited on, and at most ``limit + 1`` bytes are ever read: a file that turns out
    longer (one still growing, a device behind the link) is refused, not truncated.

    Raises:
        ConfigError: the file cannot be opened, is not a regular file, or holds more than
            ``limit`` bytes; the message names the file.
    """
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        msg = f"{p}: cannot read config: {exc.strerror or exc}"
        raise ConfigError(msg, path=p) from exc
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            what = _FILE_KINDS.get(stat.S_IFMT(mode), "not a regular file")
            msg = f"{p}: cannot read config: {what}, not a regular file"
            raise ConfigError(msg, path=p)
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            msg = f"{p}: cannot read config: {exc.strerror or exc}"
            raise ConfigError(msg, path=p) from exc
    if len(data) > limit:
        msg = f"{p}: cannot read config: larger than {limit:,} bytes (not read further)"
        raise ConfigError(msg, path=p)
    return data


_FILE_KINDS = {
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def load_config(path: str | Path | None = None, text: str | None = None) -> AppConfig:
    """Load and validate a YAML config; ``None`` loads the packaged default.

    Args:
        path: The file, named in every error.
        text: Its content when the caller has read it already (the reload watcher
            validates exactly the bytes it compared).

    Raises:
        ConfigError: the file is missing, not a regular file, larger than
            :data:`MAX_CONFIG_BYTES`, not YAML, or invalid; the message names the file
            and each offending field.
    """
    p = Path(path) if path else DEFAULT_CONFIG
    if text is None:
        raw = read_config_file(p)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            msg = f"{p}: not UTF-8 ({exc})"
            raise ConfigError(msg, path=p) from exc
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        msg = f"{p}: not valid YAML: {exc}"
        raise ConfigError(msg, path=p) from exc
    if not isinstance(data, dict):
        msg = f"{p}: top level must be a mapping, got {type(data).__name__}"
        raise ConfigError(msg, path=p)
    try:
        return AppConfig.model_validate(data)
    except ValidationError as exc:
        fields = [".".join(str(x) for x in _where(e["loc"])) or "<root>" for e in exc.errors()]
        problems = "; ".join(f"{f}: {e['msg']}" for f, e in zip(fields, exc.errors(), strict=True))
        msg = f"{p}: invalid config: {problems}"
        raise ConfigError(msg, path=p, fields=fields) from exc


def _where(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """An error's location as the file spells it: a rule's kind (pydantic's tag) left out.

    ``rules.2.frequency.pattern`` is ``rules.2.pattern`` in the file.
    """
    if len(loc) > 3 and loc[0] == "rules" and isinstance(loc[1], int) and loc[2] in RULE_KINDS:
        return (*loc[:2], *loc[3:])
    return loc
