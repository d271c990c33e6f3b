"""textcraft-synth@1 and a generated world side by side: a markdown table and one PNG of histograms.

    python scripts/compare_worlds.py [--seed 7] [--data-dir data] [--out-dir docs]

Generates the world and default tasks of ``--seed`` with :mod:`tcsynth.generate`, reads @1's records from
``--data-dir``, prints the table and writes ``world-shape.md`` and ``world-shape.png`` into ``--out-dir``:
items per depth, recipe fan-in (ingredients per recipe), result counts, and gold crafts per task for each
difficulty.  The same seed and records give the same table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Mapping, Tuple

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from tcsynth import generate, records, store  # noqa: E402

REFERENCE = "@1"


def world_figures(doc: Mapping[str, Any]) -> Dict[str, Any]:
    recipes = [item_recipes[0] for item_recipes in doc["recipes"].values()]
    used = Counter(name for recipe in recipes for name, _ in recipe["ingredients"])
    every_item = list(doc["recipes"]) + list(doc["base_items"])
    return {
        "base": len(doc["base_items"]),
        "craftable": len(doc["recipes"]),
        "max_depth": max(doc["depths"].values()),
        "per_depth": Counter(doc["depths"].values()),
        "fan_in": Counter(len(recipe["ingredients"]) for recipe in recipes),
        "result_count": Counter(recipe["result_count"] for recipe in recipes),
        "amount": Counter(amount for recipe in recipes for _, amount in recipe["ingredients"]),
        "fan_out_mean": sum(used.values()) / len(every_item),
        "never_used": sum(1 for item in every_item if item not in used),
    }


def task_figures(tasks: Mapping[str, List[Tuple[str, int]]]) -> Dict[str, Any]:
    """``tasks``: per split, ``(difficulty, gold crafts)`` per task."""
    crafts = {d: [n for split in records.SPLITS for difficulty, n in tasks[split] if difficulty == d] for d in records.DIFFICULTIES}
    return {
        "counts": {split: Counter(d for d, _ in tasks[split]) for split in records.SPLITS},
        "crafts": crafts,
    }


def percent(ours: float, theirs: float) -> str:
    return "%+.1f%%" % (100.0 * (ours - theirs) / theirs) if theirs else "n/a"


def share_row(label: str, key: Any, ours: Counter, theirs: Counter) -> str:
    a, b = theirs[key] / sum(theirs.values()), ours[key] / sum(ours.values())
    return "| %s %s | %.1f%% | %.1f%% | %+.1f pt |" % (label, key, 100 * a, 100 * b, 100 * (b - a))


def table(seed: int, at1: Dict[str, Any], ours: Dict[str, Any], at1_tasks, our_tasks, same: int) -> str:
    name = "seed %d" % seed
    lines = ["| measure | %s | %s | difference |" % (REFERENCE, name), "|---|---:|---:|---:|"]
    for key, label in (("base", "base items"), ("craftable", "craftable items"), ("max_depth", "deepest recipe")):
        lines.append("| %s | %d | %d | %+d |" % (label, at1[key], ours[key], ours[key] - at1[key]))
    for depth in range(1, max(at1["max_depth"], ours["max_depth"]) + 1):
        a, b = at1["per_depth"][depth], ours["per_depth"][depth]
        lines.append("| items at depth %d | %d | %d | %s |" % (depth, a, b, percent(b, a)))
    for key in sorted(set(at1["result_count"]) | set(ours["result_count"])):
        lines.append(share_row("result_count", key, ours["result_count"], at1["result_count"]))
    for key in sorted(set(at1["fan_in"]) | set(ours["fan_in"])):
        lines.append(share_row("ingredients per recipe:", key, ours["fan_in"], at1["fan_in"]))
    for key in sorted(set(at1["amount"]) | set(ours["amount"])):
        lines.append(share_row("ingredient amount", key, ours["amount"], at1["amount"]))
    lines.append("| recipes using an item (mean) | %.2f | %.2f | %s |" % (at1["fan_out_mean"], ours["fan_out_mean"], percent(ours["fan_out_mean"], at1["fan_out_mean"])))
    lines.append("| items no recipe uses | %d | %d | %+d |" % (at1["never_used"], ours["never_used"], ours["never_used"] - at1["never_used"]))
    for split in records.SPLITS:
        for difficulty in records.DIFFICULTIES:
            a, b = at1_tasks["counts"][split][difficulty], our_tasks["counts"][split][difficulty]
            lines.append("| %s %s tasks | %d | %d | %+d |" % (split, difficulty, a, b, b - a))
    for difficulty in records.DIFFICULTIES:
        a, b = at1_tasks["crafts"][difficulty], our_tasks["crafts"][difficulty]
        lines.append(
            "| gold crafts per %s task: mean (min-max) | %.2f (%d-%d) | %.2f (%d-%d) | %s |"
            % (difficulty, statistics.mean(a), min(a), max(a), statistics.mean(b), min(b), max(b), percent(statistics.mean(b), statistics.mean(a)))
        )
    lines.append("| recipes equal to @1's | %d | %d | |" % (at1["craftable"], same))
    lines.append("")
    lines.append(
        "%s is `textcraft-synth@1`; %s is `generate_world(%d)` with `generate_tasks(world, %d)` (generator "
        "version %s); task figures count train and val together unless a split is named."
        % (REFERENCE, name, seed, seed, generate.GENERATOR_VERSION)
    )
    return "\n".join(lines) + "\n"


def plot(path: Path, seed: int, at1, ours, at1_tasks, our_tasks) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = (REFERENCE, "seed %d" % seed)
    colours = ("#4c72b0", "#dd8452")
    figure = plt.figure(figsize=(16, 8))
    grid = figure.add_gridspec(2, 4)

    def bars(axis, key, title, xlabel):
        keys = sorted(set(at1[key]) | set(ours[key]))
        for offset, (figures, label, colour) in enumerate(zip((at1, ours), labels, colours)):
            axis.bar([k + (offset - 0.5) * 0.4 for k in keys], [figures[key][k] for k in keys], width=0.4, label=label, color=colour)
        axis.set_xticks(keys)
        axis.set_title(title)
        axis.set_xlabel(xlabel)
        axis.set_ylabel("items")
        axis.legend()

    bars(figure.add_subplot(grid[0, 0:2]), "per_depth", "Items per depth", "crafting depth")
    bars(figure.add_subplot(grid[0, 2]), "fan_in", "Recipe fan-in", "ingredients per recipe")
    bars(figure.add_subplot(grid[0, 3]), "result_count", "Result count per craft", "result_count")
    for column, difficulty in enumerate(records.DIFFICULTIES):
        axis = figure.add_subplot(grid[1, column])
        values = (at1_tasks["crafts"][difficulty], our_tasks["crafts"][difficulty])
        top = max(max(v) for v in values)
        axis.hist(values, bins=20, range=(0, top), label=labels, color=colours)
        axis.set_title("Gold crafts per %s task" % difficulty)
        axis.set_xlabel("crafts")
        axis.set_ylabel("tasks")
        axis.legend()
    figure.suptitle("textcraft-synth@1 and the generated world of seed %d" % seed)
    figure.tight_layout()
    figure.savefig(path, dpi=80, metadata={"Software": None})
    plt.close(figure)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--data-dir", type=Path, default=store.DEFAULT_DATA_DIR)
    parser.add_argument("--out-dir", type=Path, default=REPO_ROOT / "docs")
    args = parser.parse_args(argv)

    data = store.load_records(args.data_dir)
    at1_doc = data.world_document
    started = time.perf_counter()
    doc = generate.generate_world(args.seed)
    tasks = generate.generate_tasks(doc, args.seed)
    seconds = time.perf_counter() - started

    at1, ours = world_figures(at1_doc), world_figures(doc)
    at1_tasks = task_figures({s: [(r["difficulty"], r["num_craft_steps"]) for r in data.tasks[s]] for s in records.SPLITS})
    our_tasks = task_figures({s: [(t["misc"]["difficulty"], t["misc"]["num_craft_steps"]) for t in tasks[s]] for s in records.SPLITS})
    same = sum(at1_doc["recipes"].get(item) == recipe for item, recipe in doc["recipes"].items())

    text = table(args.seed, at1, ours, at1_tasks, our_tasks, same)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "world-shape.md").write_text(text)
    plot(args.out_dir / "world-shape.png", args.seed, at1, ours, at1_tasks, our_tasks)
    print(text, end="")
    print("generating world and tasks took %.2f s" % seconds)
    print("wrote %s and %s" % (args.out_dir / "world-shape.md", args.out_dir / "world-shape.png"))


if __name__ == "__main__":
    main()
