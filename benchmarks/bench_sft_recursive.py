"""How long config sft-recursive takes to render and check, per split, and what it holds.

    python benchmarks/bench_sft_recursive.py [--runs 3] [--splits val train]

Each run renders every task of a split as its tree of agents and replays them together (what ``build``
does for this config).  Prints the median wall and CPU seconds over --runs runs, then the delegation
statistics of the rows: agents per task by difficulty and the deepest agent of each task.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tcsynth import records, sft_recursive, store  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--splits", nargs="+", default=list(records.SPLITS))
    args = parser.parse_args()
    data = store.load_records(store.DEFAULT_DATA_DIR)
    for split in args.splits:
        walls, cpus, rows = [], [], []
        for _ in range(args.runs):
            wall, cpu = time.perf_counter(), time.process_time()
            rows = sft_recursive.sft_recursive_rows(data, split, progress=False)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        agents = collections.Counter(row["name"] for row in rows)
        difficulty = {row["name"]: row["difficulty"] for row in rows}
        deepest = collections.defaultdict(int)
        for row in rows:
            deepest[row["name"]] = max(deepest[row["name"]], row["depth"])
        print("%s: %d tasks, %d rows; median of %d runs: %.1f s wall, %.1f s CPU" % (split, len(agents), len(rows), args.runs, statistics.median(walls), statistics.median(cpus)))
        for level in records.DIFFICULTIES:
            names = [name for name in agents if difficulty[name] == level]
            if names:
                depths = collections.Counter(deepest[name] for name in names)
                print("  %-8s %4d tasks  %6.2f agents/task (max %d)  delegating %4d  deepest agent %s"
                      % (level, len(names), sum(agents[n] for n in names) / len(names), max(agents[n] for n in names),
                         sum(1 for n in names if agents[n] > 1), dict(sorted(depths.items()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
