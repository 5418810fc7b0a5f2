"""``bench/results/latency_vs_rate.png``: alert latency and CPU against the input rate.

Two panels sharing a logarithmic rate axis: p50 and p99 alert latency of each steady run
(with the targets, p50 ≤ 2 s and p99 ≤ 5 s, as lines; a run where no incident paged is
marked at the top), and the CPU seconds per second of input of each stage as stacked bars, with
the machine's two cores as a line. matplotlib with the Agg backend (no display).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Stages of the CPU panel, bottom up, with their colours.
STAGES: tuple[tuple[str, str], ...] = (
    ("parse_jvm", "#4c72b0"),
    ("detect_jvm", "#55a868"),
    ("detect_python", "#8fd19e"),
    ("jvm_other", "#8172b2"),
    ("driver_python", "#ccb974"),
    ("broker", "#c44e52"),
    ("producer", "#dd8452"),
)


def draw(result: dict[str, Any], path: Path) -> Path | None:
    """Draw the steady runs of ``result`` into ``path``; None when there are none."""
    runs = sorted(
        (r for r in result.get("latency") or [] if r.get("input_records_per_s")),
        key=lambda r: r["input_records_per_s"],
    )
    if not runs:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    rates = [r["input_records_per_s"] for r in runs]
    fig, (lat_ax, cpu_ax) = plt.subplots(
        2, 1, figsize=(8, 8), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    top = 5.0
    for key, style, label in (("p50", "o-", "p50"), ("p99", "s-", "p99")):
        xs = [x for x, r in zip(rates, runs, strict=True) if r["alert_latency_s"].get(key)]
        ys = [r["alert_latency_s"][key] for r in runs if r["alert_latency_s"].get(key)]
        if ys:
            top = max(top, *ys)
        lat_ax.plot(xs, ys, style, label=f"alert latency {label}")
    lat_ax.axhline(5.0, color="#c44e52", linestyle="--", linewidth=1, label="target p99 ≤ 5 s")
    lat_ax.axhline(2.0, color="#dd8452", linestyle=":", linewidth=1, label="target p50 ≤ 2 s")
    for x, r in zip(rates, runs, strict=True):
        lat = r["alert_latency_s"]
        n = lat.get("n") or 0
        total = r.get("incidents") or 0
        y = lat.get("p99") or top
        if not n:
            lat_ax.plot([x], [top], "x", color="black")
        lat_ax.annotate(
            f"{n}/{total} paged",
            (x, y),
            textcoords="offset points",
            xytext=(4, 6),
            fontsize=8,
        )
    lat_ax.set_yscale("log")
    lat_ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    lat_ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    lat_ax.yaxis.set_minor_formatter(NullFormatter())
    lat_ax.set_ylabel("deciding record → Slack (s)")
    lat_ax.set_title("flinkwatch: alert latency and CPU against the input rate")
    lat_ax.grid(True, which="both", alpha=0.3)
    lat_ax.legend(fontsize=8, loc="upper left")

    bottom = [0.0] * len(runs)
    for stage, colour in STAGES:
        ys = [max(0.0, (r.get("cpu_s_per_input_s") or {}).get(stage) or 0.0) for r in runs]
        if not any(ys):
            continue
        cpu_ax.bar(
            rates,
            ys,
            bottom=bottom,
            width=[x * 0.35 for x in rates],
            color=colour,
            label=stage,
        )
        bottom = [b + y for b, y in zip(bottom, ys, strict=True)]
    machine = [(r.get("cpu_s_per_input_s") or {}).get("machine") for r in runs]
    if any(m is not None for m in machine):
        cpu_ax.plot(rates, machine, "k.--", linewidth=1, label="whole machine")
    cores = (result.get("machine") or {}).get("cores")
    if cores:
        cpu_ax.axhline(cores, color="black", linewidth=1, label=f"{cores} cores")
    cpu_ax.set_xscale("log")
    cpu_ax.set_xlabel("input records/s")
    cpu_ax.set_ylabel("CPU s per s of input")
    cpu_ax.grid(True, which="both", alpha=0.3)
    cpu_ax.legend(fontsize=7, loc="upper left", ncol=2)
    cpu_ax.set_xticks(rates)
    cpu_ax.set_xticklabels([f"{x:,}" for x in rates], rotation=30, fontsize=8)
    cpu_ax.xaxis.set_minor_formatter(NullFormatter())
    cpu_ax.set_xlim(min(rates) / 1.6, max(rates) * 1.6)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
