"""Reading a run folder's result files in tests."""
import csv
from pathlib import Path


def errors_by_detector(out: Path, name: str) -> dict[str, set[str]]:
    """The distinct ``error`` cells of each detector in ``out/name`` (episodes.csv, closed.csv)."""
    found: dict[str, set[str]] = {}
    with open(out / name, newline="") as fh:
        for row in csv.DictReader(fh):
            found.setdefault(row["detector"], set()).add(row["error"])
    return found
