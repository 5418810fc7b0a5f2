"""What every config section shares: frozen models, the restart-only mark, names of variables."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

#: Field metadata of a setting that takes effect only when flinkwatch restarts (it changes
#: where the job reads from, where its checkpoints are, the shape of its state, or a client
#: built once); every other setting applies on a live reload. A section marked so is
#: restart-only as a whole. ``conf.reload`` reads the marks.
RESTART: dict[str, Any] = {"reload": "restart"}


def restart_only(field: Any) -> bool:
    """Whether a pydantic field carries the :data:`RESTART` mark."""
    extra = field.json_schema_extra
    return isinstance(extra, dict) and extra.get("reload") == "restart"


class FrozenModel(BaseModel):
    """A config section: immutable, and an unknown key is an error naming it."""

    model_config = ConfigDict(frozen=True, extra="forbid")


#: What an environment variable's name may be (a ``*_env`` setting names one).
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
