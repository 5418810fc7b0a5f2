"""docs/rules.md says what the code does: its YAML loads, its config check line is the real one."""

from __future__ import annotations

import re
from pathlib import Path

from conf import load_config

DOC = Path(__file__).resolve().parents[1] / "docs" / "rules.md"


def test_every_yaml_example_in_the_rules_page_loads_as_a_config(tmp_path) -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 4
    kinds = set()
    for i, text in enumerate(blocks):
        path = tmp_path / f"{i}.yaml"
        path.write_text(text)
        (rule,) = load_config(path).rules
        kinds.add(rule.kind)
    assert kinds == {"threshold", "frequency", "flatline", "spike"}


def test_the_config_check_shown_is_what_it_prints(capsys) -> None:
    from streaming.cli import main

    shown = re.search(r"```\n\$ flinkwatch config check (\S+)\n(.*?)```", DOC.read_text(), re.S)
    assert shown is not None
    assert main(["config", "check", shown[1]]) == 0
    printed = capsys.readouterr().out.splitlines()
    lines = shown[2].splitlines()
    assert printed[0].startswith(lines[0].removesuffix("..."))
    assert printed[1:] == lines[1:]
