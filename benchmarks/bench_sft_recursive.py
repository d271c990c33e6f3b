"""How long config sft-recursive takes to render and check, per split, and what it holds.

    python benchmarks/bench_sft_recursive.py [--runs 3] [--splits val train] [--processes 2]

Each run renders every task of a split as its tree of agents and replays them together (what ``build``
does for this config, there with two processes).  Prints the median wall and CPU seconds (this process
and its workers) over --runs runs, then the delegation statistics of the rows: agents per task by
difficulty and the deepest agent of each task.
"""

from __future__ import annotations

import argparse
import collections
import resource
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tcsynth import records, sft_recursive, store  # noqa: E402


def _cpu() -> float:
    """User + system seconds of this process and its finished children (the forked workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--splits", nargs="+", default=list(records.SPLITS))
    parser.add_argument("--processes", type=int, default=1, help="forked processes rendering (build uses 2)")
    args = parser.parse_args()
    data = store.load_records(store.DEFAULT_DATA_DIR)
    for split in args.splits:
        walls, cpus, rows = [], [], []
        for _ in range(args.runs):
            wall, cpu = time.perf_counter(), _cpu()
            rows = sft_recursive.sft_recursive_rows(data, split, progress=False, processes=args.processes)
            walls.append(time.perf_counter() - wall)
            cpus.append(_cpu() - cpu)
        agents = collections.Counter(row["name"] for row in rows)
        difficulty = {row["name"]: row["difficulty"] for row in rows}
        deepest = collections.defaultdict(int)
        for row in rows:
            deepest[row["name"]] = max(deepest[row["name"]], row["depth"])
        print("%s: %d tasks, %d rows; %d process(es), median of %d runs: %.1f s wall, %.1f s CPU"
              % (split, len(agents), len(rows), args.processes, args.runs, statistics.median(walls), statistics.median(cpus)))
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
