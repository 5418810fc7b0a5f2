"""The configuration reference: docs/configuration.md and the README follow the models."""

from __future__ import annotations

from pathlib import Path

from detectors import REGISTRY


def test_readme_documents_every_config_key() -> None:
    from conf import AppConfig
    from detectors import DetectorParams

    # README.md, or a page of docs/ (docs/metrics-endpoint.md documents the metrics.tls_*
    # and metrics.basic_auth_* keys).
    repo = Path(__file__).resolve().parents[2]
    readme = "\n".join(
        p.read_text() for p in [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]
    )
    from pydantic import BaseModel

    keys = []
    for section, field in AppConfig.model_fields.items():
        ann = field.annotation
        if section == "detectors":
            continue
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            keys += [f"{section}.{name}" for name in ann.model_fields]
        else:
            keys.append(section)
    keys += [f"detectors.<name>.{p}" for p in DetectorParams.model_fields]
    for det, cls in REGISTRY.items():
        keys += [
            f"detectors.{det}.{p}"
            for p in cls.params_model.model_fields
            if p not in DetectorParams.model_fields
        ]
    missing = [k for k in keys if f"`{k}`" not in readme]
    assert missing == []


def test_the_configuration_reference_is_generated_from_the_models() -> None:
    # docs/configuration.md holds what the models say; `python -m conf.reference` rewrites it.
    from conf.reference import DOC, render

    assert render() in DOC.read_text(encoding="utf-8")


def test_every_config_key_says_what_it_does() -> None:
    from conf.reference import rows

    silent = [k for k, _d, meaning in rows() if len(meaning.split()) < 3]
    assert silent == []
    keys = [k for k, _d, _m in rows()]
    assert "slack.max_retries" in keys and "detectors.checkpoint_creep.window" in keys
