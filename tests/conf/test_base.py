"""What every config section shares: frozen, an unknown key refused, the restart-only mark."""

from __future__ import annotations

import re

import pytest
from pydantic import Field, ValidationError

from conf import AppConfig
from conf.base import ENV_NAME, RESTART, FrozenModel, restart_only


class Section(FrozenModel):
    live: int = 1
    fixed: int = Field(default=2, json_schema_extra=RESTART)
    other: int = Field(default=3, json_schema_extra={"reload": "live"})


def test_a_section_is_frozen_and_names_an_unknown_key() -> None:
    with pytest.raises(ValidationError, match="frozen"):
        Section().live = 5  # type: ignore[misc]
    with pytest.raises(ValidationError, match="typo"):
        Section.model_validate({"typo": 1})


def test_only_a_field_marked_restart_is_restart_only() -> None:
    fields = Section.model_fields
    assert restart_only(fields["fixed"])
    assert not restart_only(fields["live"])
    assert not restart_only(fields["other"])


def test_the_sections_that_change_where_the_job_reads_and_writes_are_restart_only() -> None:
    marked = {name for name, f in AppConfig.model_fields.items() if restart_only(f)}
    assert {"kafka", "output", "metrics", "webhooks"} <= marked
    assert "detectors" not in marked and "silences" not in marked


@pytest.mark.parametrize(
    ("name", "ok"),
    [("SLACK_TOKEN", True), ("_x1", True), ("1TOKEN", False), ("MY-TOKEN", False), ("", False)],
)
def test_an_environment_variable_name(name: str, ok: bool) -> None:
    assert bool(re.match(ENV_NAME, name)) is ok
