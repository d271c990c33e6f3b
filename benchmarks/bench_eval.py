"""Wall time of ``python -m textcraft_synth eval --agent planner`` over every val task, with 1 and 2 workers.

    python benchmarks/bench_eval.py [--runs 3] [--workers 1 2] [--batch] [--no-turns]

Each run is the whole command in a fresh process (start-up, reading data/, the episodes, writing the
results), into a temporary directory; the median of ``--runs`` runs is printed per worker count, as wall
time and as the CPU time (user + system) of the command and its workers, which a busy machine inflates
less.  Then the median time of the episodes alone (``run_episodes`` in this process, records already
read).  Issue 11's goal: ``eval --agent planner --batch`` over val under 1.5 s.  The
reference implementation (platoon-textcraft 0.3.0) ships no evaluation runner, so there is nothing to
compare against.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def one_run(workers: int, extra: list) -> tuple:
    """(wall seconds, CPU seconds) of one whole command."""
    with tempfile.TemporaryDirectory() as scratch:
        command = [sys.executable, "-m", "textcraft_synth", "eval", "--agent", "planner", "--split", "val",
                   "--workers", str(workers), "--out", os.path.join(scratch, "out"), "-q", *extra]
        start = time.perf_counter()
        child = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit("eval failed: %s" % " ".join(command))
        return wall, usage.ru_utime + usage.ru_stime


def episodes_only(workers: int, batch: bool, record_turns: bool, runs: int) -> list:
    from tcsynth import store
    from tcsynth.evaluate import AgentSpec, Protocol, run_episodes

    data = store.load_records()
    spec = AgentSpec("planner", (("calls_per_turn", None if batch else 1),))
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run_episodes(data.tasks["val"], data.world_document, spec, Protocol(), workers, progress=False, record_turns=record_turns)
        times.append(time.perf_counter() - start)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per worker count (default: %(default)s)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts (default: 1 2)")
    parser.add_argument("--batch", action="store_true", help="the batched planner instead of one call per turn")
    parser.add_argument("--no-turns", action="store_true", help="leave the turns out of episodes.jsonl")
    args = parser.parse_args()
    extra = (["--batch"] if args.batch else []) + (["--no-turns"] if args.no_turns else [])
    label = "planner%s%s" % (" --batch" if args.batch else "", " --no-turns" if args.no_turns else "")
    print("eval --agent %s, 632 val tasks, %d runs each (cpus: %d)" % (label, args.runs, os.cpu_count() or 0))
    for workers in args.workers:
        runs = [one_run(workers, extra) for _ in range(args.runs)]
        walls, cpus = [wall for wall, _ in runs], [cpu for _, cpu in runs]
        print("workers=%d  median %.2f s wall, %.2f s CPU  (wall: %s)" % (workers, statistics.median(walls), statistics.median(cpus), ", ".join("%.2f" % t for t in walls)))
    for workers in args.workers:
        times = episodes_only(workers, args.batch, not args.no_turns, args.runs)
        print("episodes only, workers=%d  median %.2f s  (runs: %s)" % (workers, statistics.median(times), ", ".join("%.2f" % t for t in times)))
    print("reference: platoon-textcraft 0.3.0 has no evaluation runner; no comparison")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
