"""How big the sft conversations are, per difficulty: turns, tool calls and characters.

    pip install '.[plots]' && python scripts/sft_stats.py [--out-dir docs]

Characters are those of every message's content plus every tool call's name and JSON arguments (the
``num_characters`` column); token counts depend on the model's tokenizer and chat template, roughly a
quarter of the characters for item codes like these.  Writes ``sft-sizes.md`` (a markdown table),
``sft-sizes.json`` and ``sft-sizes.png`` (box plots) into ``--out-dir``; the same records give the same files.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Dict, List

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from tcsynth import records, sft, store  # noqa: E402

MEASURES = (
    ("num_turns", "assistant turns"),
    ("num_tool_calls", "tool calls (= turns with one call per turn)"),
    ("num_characters", "characters"),
)


def measured_rows(data: store.Records) -> List[Dict[str, Any]]:
    """Every sft row's size columns (both splits)."""
    columns = ("difficulty",) + tuple(column for column, _ in MEASURES)
    return [{column: row[column] for column in columns} for split in records.SPLITS for row in sft.sft_rows(data, split)]


def percentile(values: List[int], fraction: float) -> int:
    """The nearest-rank percentile (a value that occurs)."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(round(fraction * len(ordered))) - 1))]


def summary(rows: List[Dict[str, Any]]) -> Dict[str, Dict[str, Dict[str, int]]]:
    """``{difficulty: {measure: {min, median, p90, max}}}`` over both splits."""
    table: Dict[str, Dict[str, Dict[str, int]]] = {}
    for difficulty in records.DIFFICULTIES + ("all",):
        mine = [row for row in rows if difficulty in ("all", row["difficulty"])]
        table[difficulty] = {"tasks": {"count": len(mine)}}
        for column, _ in MEASURES:
            values = [row[column] for row in mine]
            table[difficulty][column] = {
                "min": min(values),
                "median": int(statistics.median(values)),
                "p90": percentile(values, 0.9),
                "max": max(values),
            }
    return table


def markdown(table: Dict[str, Dict[str, Dict[str, int]]]) -> str:
    """The table for the README: median, 90th percentile and maximum of each measure."""
    lines = [
        "| difficulty | tasks | " + " | ".join(title for _, title in MEASURES) + " |",
        "|---|---:|" + "---:|" * len(MEASURES),
    ]
    for difficulty, measures in table.items():
        cells = ["{median:,} / {p90:,} / {max:,}".format(**measures[column]) for column, _ in MEASURES]
        lines.append("| %s | %s | %s |" % (difficulty, "{:,}".format(measures["tasks"]["count"]), " | ".join(cells)))
    lines.append("")
    lines.append("Each cell: median / 90th percentile / maximum over train and val.")
    return "\n".join(lines) + "\n"


def plot(rows: List[Dict[str, Any]], path: Path) -> None:
    """Box plots of turns and characters per difficulty (PNG, no timestamp, so reproducible)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [MEASURES[0], (MEASURES[1][0], "turns, one call per turn"), MEASURES[2]]
    figure, axes = plt.subplots(1, len(shown), figsize=(15, 3.8))
    for axis, (column, title) in zip(axes, shown):
        groups = [[row[column] for row in rows if row["difficulty"] == d] for d in records.DIFFICULTIES]
        axis.boxplot(groups, tick_labels=list(records.DIFFICULTIES), whis=(0, 100))
        axis.set_title(title)
        if column != "num_turns":
            axis.set_yscale("log")
        axis.grid(axis="y", alpha=0.3)
    figure.suptitle("textcraft-synth sft conversations per difficulty (whiskers: min and max)")
    figure.tight_layout()
    figure.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=str(REPO_ROOT / "docs"), help="where to write the files (default: %(default)s)")
    parser.add_argument("--data-dir", default=str(store.DEFAULT_DATA_DIR), help="the data/ directory (default: %(default)s)")
    args = parser.parse_args()
    try:  # checked first: the measuring takes minutes
        import matplotlib  # noqa: F401
    except ImportError:
        parser.exit(1, "error: this script draws with matplotlib: pip install '.[plots]'\n")
    rows = measured_rows(store.load_records(Path(args.data_dir)))
    table = summary(rows)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sft-sizes.md").write_text(markdown(table))
    (out / "sft-sizes.json").write_text(json.dumps(table, indent=1) + "\n")
    plot(rows, out / "sft-sizes.png")
    sys.stdout.write(markdown(table))
    print("wrote %s, %s and %s" % (out / "sft-sizes.md", out / "sft-sizes.json", out / "sft-sizes.png"))


if __name__ == "__main__":
    main()
