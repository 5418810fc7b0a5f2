"""What ``run`` and ``replay`` print when they end: events, dead letters, alerts, incidents."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path


def print_summary(
    alerts: Counter[tuple[str, str, str]],
    kinds: Counter[str],
    dead: Counter[str],
    names: Mapping[str, str] | None = None,
) -> None:
    """Events by kind, dead letters by reason, and a table of alerts per detector and entity.

    ``names``: a TaskManager entity's id as its alerts spelled it (``tm:localhost:40003-6cf67b``
    rather than its key ``tm:localhost_40003_6cf67b``, which counts the rows); an entity
    without one is shown by its key.
    """
    names = names or {}

    def shown(entity: str) -> str:
        return f"tm:{names[entity]}" if entity in names else entity

    out = sys.stdout
    print(
        "events by kind: " + (", ".join(f"{k}={v}" for k, v in sorted(kinds.items())) or "none"),
        file=out,
    )
    print(
        "dead letters:   " + (", ".join(f"{k}={v}" for k, v in sorted(dead.items())) or "none"),
        file=out,
    )
    if not alerts:
        print("alerts: none", file=out)
        return
    keys = sorted({(d, e) for (d, e, _s) in alerts})
    w_det = max(len("detector"), *(len(d) for d, _ in keys))
    w_ent = max(len("entity"), *(len(shown(e)) for _, e in keys))
    print(f"{'detector':<{w_det}}  {'entity':<{w_ent}}  firing  resolved", file=out)
    for d, e in keys:
        firing, resolved = alerts[(d, e, "firing")], alerts[(d, e, "resolved")]
        print(f"{d:<{w_det}}  {shown(e):<{w_ent}}  {firing:>6}  {resolved:>8}", file=out)


def print_incidents(alerts_file: Path) -> None:
    """The incidents of several alerts, each with its members and latest root-cause line."""
    records = [json.loads(line) for line in alerts_file.read_text().splitlines()]
    causes = {r["incident_id"]: r["root_cause"] for r in records if r.get("incident_id")}
    for iid, cause in causes.items():
        # The alert that opened the incident was alone when it fired: it carries no id.
        members: list[str] = []
        for r in records:
            if iid in (r.get("incident_id"), r["alert_id"]) and r["detector"] not in members:
                members.append(r["detector"])
        print(f"incident {iid} ({' -> '.join(members)}): {cause}", file=sys.stdout)
