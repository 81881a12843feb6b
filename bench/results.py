"""One row of the table: a figure, its baseline from the same run, the target and the verdict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class Row:
    db: str
    measure: str
    figure: str
    baseline: str = ""
    ratio: str = ""
    target: str = ""
    met: bool | None = None  # None: no target for this figure, or it could not be measured
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Row:
        return cls(**data)


def verdict(met: bool | None) -> str:
    return {True: "yes", False: "NO", None: ""}[met]


def table(rows: Sequence[Row]) -> str:
    """A Markdown table (readable in a terminal and pasted as is into BENCHMARKS.md)."""
    head = ["DB", "Measure", "Figure", "Baseline (same run)", "Ratio", "Target", "Met"]
    body = [
        [r.db, r.measure, r.figure, r.baseline, r.ratio, r.target, verdict(r.met)] for r in rows
    ]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]

    def fmt(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    lines = [fmt(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += [fmt(line) for line in body]
    notes = [f"- {r.db} {r.measure}: {r.note}" for r in rows if r.note]
    return "\n".join(lines + (["", *notes] if notes else []))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def pct(value: float) -> str:
    return f"{value * 100:.0f}%"
