"""Generator speed: a full-size world, its default tasks, and the replay check inside them.

    python benchmarks/bench_generate.py [--runs 5] [--seed 7] [--full]

Times, each the median over --runs runs (with the fastest and slowest run): ``generate_world(seed)``;
``generate_tasks(world, seed)`` (2,522 + 632 tasks, which includes planning every gold run and replaying
it in the engine); and, within that, the replay check alone (``verify_tasks`` on both splits).  The
output also counts the gold crafts replayed, and gives the process CPU time of world plus tasks, which a
busy shared machine inflates less than the wall-clock time.  ``--full`` also times the whole command,
``python -m textcraft_synth generate-world --seed S --out DIR`` (every config, the card, the index files), in
a new process each run.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tcsynth import generate, records  # noqa: E402


CPU_SECONDS = []  # process CPU time of each generate_world + generate_tasks run


def timed(function, *args, **kwargs):
    gc.collect()
    started = time.perf_counter()
    result = function(*args, **kwargs)
    return time.perf_counter() - started, result


def summary(label: str, seconds) -> str:
    return "%-44s median %6.2f s   (min %.2f, max %.2f, %d runs)" % (label, statistics.median(seconds), min(seconds), max(seconds), len(seconds))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--full", action="store_true", help="also time the whole generate-world command")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1, got %d" % args.runs)

    world_s, tasks_s, verify_s, total_s = [], [], [], []
    for _ in range(args.runs):
        cpu_started = time.process_time()
        seconds, world = timed(generate.generate_world, args.seed)
        world_s.append(seconds)
        seconds, tasks = timed(generate.generate_tasks, world, args.seed)
        tasks_s.append(seconds)
        total_s.append(world_s[-1] + tasks_s[-1])
        CPU_SECONDS.append(time.process_time() - cpu_started)
        verify_s.append(sum(timed(generate.verify_tasks, world, split, tasks[split])[0] for split in records.SPLITS))

    crafts = sum(len(task["misc"]["gold_trajectory"]) for split in records.SPLITS for task in tasks[split])
    print("seed %d: %d items, %d tasks, %d gold crafts replayed" % (
        args.seed, len(world["recipes"]) + len(world["base_items"]), sum(len(t) for t in tasks.values()), crafts))
    print(summary("generate_world", world_s))
    print(summary("generate_tasks (plan + replay check)", tasks_s))
    print(summary("  of which the replay check", verify_s))
    print(summary("world and tasks", total_s))
    print(summary("world and tasks, CPU time of this process", CPU_SECONDS))
    if args.full:
        wall, cpu = [], []
        for _ in range(args.runs):
            out = Path(tempfile.mkdtemp(prefix="bench-world-")) / "world"
            before = os.times()
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "textcraft_synth", "generate-world", "--seed", str(args.seed), "--out", str(out), "-q"],
                           check=True, cwd=REPO, stdout=subprocess.DEVNULL)
            wall.append(time.perf_counter() - started)
            after = os.times()
            cpu.append(after.children_user + after.children_system - before.children_user - before.children_system)
            shutil.rmtree(out.parent)
        print(summary("generate-world, whole command (every config)", wall))
        print(summary("  CPU time of the command", cpu))


if __name__ == "__main__":
    main()
