"""Where a run's state and results go: ``output`` (checkpoints, ledger, alert file)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from conf.base import FrozenModel


def checkpoint_scheme(location: str | None) -> str | None:
    """The URI scheme of a checkpoint location (``hdfs``, ``s3a``...); None for a path."""
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", location or "")
    # A one-letter "scheme" is a Windows drive, which is a path.
    return m.group(1).lower() if m and len(m.group(1)) > 1 else None


class OutputConfig(FrozenModel):
    """Where state and results go."""

    state_dir: Path = Field(
        default=Path("var"),
        description=(
            "Checkpoints (unless checkpoint_location says otherwise), the alert ledger, the "
            "silences, the bus placement record, the alert file and dead letters (and the "
            "replay's event files), on the driver's local disk."
        ),
    )
    checkpoint_location: str | None = Field(
        default=None,
        description=(
            "Where Spark keeps the queries' checkpoints (offsets, commits, the detectors' "
            "RocksDB state): a path, or a Hadoop file system URI such as "
            "hdfs://namenode:8020/flinkwatch/checkpoints or s3a://bucket/flinkwatch/checkpoints "
            "(its settings, e.g. fs.s3a.endpoint, go in spark.options as spark.hadoop.*); "
            "null = <state_dir>/checkpoints. The ledger and the other files stay in state_dir "
            "(docs/deployment.md)."
        ),
    )
    alerts_file: Path | None = Field(
        default=None, description="The JSON-lines alert file; null = <state_dir>/alerts.jsonl."
    )
    deadletter_dir: Path | None = Field(
        default=None, description="Directory of dead-letter files; null = <state_dir>/deadletters."
    )
    console: bool = Field(default=True, description="Also log each transition.")
    ledger_retention_days: float = Field(
        default=30.0,
        gt=0,
        description=(
            "The ledger forgets closed incidents whose deliveries are settled after this long "
            "(checked at start and every 6 h)."
        ),
    )
    deadletters_max_per_batch: int = Field(
        default=10_000, ge=1, description="dead letters kept per batch; the rest are counted"
    )
    deadletters_retain_mb: float = Field(
        default=256.0, gt=0, description="dead-letter files kept, oldest deleted first (MB)"
    )
    alerts_file_max_mb: float = Field(
        default=64.0, gt=0, description="the alert file is rotated at this size (MB)"
    )
    alerts_file_keep: int = Field(default=5, ge=0, description="rotated alert files kept")
    page_max_age_s: float | None = Field(
        default=3600.0,
        gt=0,
        description=(
            "a transition whose event time is older than this when it is recorded is kept "
            "(ledger, alert file, metrics) but not sent to Slack: it is marked stale, and "
            "so are its incident's later transitions, unless the incident escalates recently "
            "or is still open when flinkwatch catches up after being behind (then it pages "
            "once; docs/guarantees.md); null = page whatever the age"
        ),
    )

    @model_validator(mode="after")
    def _known_scheme(self) -> OutputConfig:
        scheme = checkpoint_scheme(self.checkpoint_location)
        if scheme in ("s3", "s3n"):
            msg = (
                f"output.checkpoint_location: {scheme}:// has no file system in Hadoop 3; "
                "use s3a://"
            )
            raise ValueError(msg)
        return self

    @property
    def checkpoints(self) -> str:
        """Spark checkpoints (offsets and detector state): a local path or a Hadoop URI."""
        if self.checkpoint_location is None:
            return str(self.state_dir / "checkpoints")
        return self.checkpoint_location

    @property
    def checkpoint_dir(self) -> Path:
        """Spark checkpoints as a local directory.

        Raises:
            ValueError: ``checkpoint_location`` is on a Hadoop file system (hdfs://, s3a://):
                read it through ``streaming.checkpoints.open_dir``.
        """
        if checkpoint_scheme(self.checkpoint_location) not in (None, "file"):
            msg = f"the checkpoints are not on a local disk: {self.checkpoint_location}"
            raise ValueError(msg)
        if self.checkpoint_location is None:
            return self.state_dir / "checkpoints"
        return Path(urlsplit(self.checkpoint_location).path or self.checkpoint_location)

    @property
    def alerts_path(self) -> Path:
        """The JSON-lines alert log."""
        return self.alerts_file or self.state_dir / "alerts.jsonl"

    @property
    def ledger_path(self) -> Path:
        """The alert ledger (SQLite): every transition and its delivery per sink."""
        return self.state_dir / "ledger.sqlite"

    @property
    def silences_path(self) -> Path:
        """Silences added with ``flinkwatch silence add`` (SQLite)."""
        return self.state_dir / "silences.sqlite"

    @property
    def deadletter_path(self) -> Path:
        """Directory of dead-letter JSON-lines files."""
        return self.deadletter_dir or self.state_dir / "deadletters"
