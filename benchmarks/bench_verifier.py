"""Worst cases for the Harbor verifier: peak memory and time of ``textcraft_game.py verify`` on hostile logs.

    python benchmarks/bench_verifier.py [--runs 3] [--only NAME ...]

Each shape is a log an agent could leave behind, grown to the log's caps (32 MiB, 100,000 records,
64 KiB a line) while staying well formed for as long as possible, so the verifier has to read and replay
all of it.  Every run is a fresh ``python3 -I`` child that runs the game file's ``verify`` as
``tests/test.sh`` does, then reports its peak resident set size (``VmHWM``: ``ru_maxrss`` would count the
pages of this parent that the child held between fork and exec); wall time is measured around it and CPU
time comes from ``os.wait4``.  Figures are medians over --runs runs.  The bar (issue 9): under 256 MB and 10 s per log.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tcsynth import game, harbor, records, store  # noqa: E402

LOG_RELPATH = "app/textcraft/actions.jsonl"


def fill(make, limit_records=game.RECORD_LIMIT, limit_bytes=game.LOG_LIMIT, finish=False):
    """Records ``make(seq)`` -> (tool, arguments[, ok]) appended while both caps hold; bytes of the log."""
    chunks, size, seq = [], 0, 0
    while seq < limit_records:
        line = game.format_record(seq + 1, *make(seq + 1))
        if size + len(line) > limit_bytes:
            break
        chunks.append(line)
        size += len(line)
        seq += 1
    if finish:
        chunks[-1] = game.format_record(seq, "finish", {"message": "done"})
    return b"".join(chunks)


def padded_items(names, width):
    """A get_info item list of about ``width`` bytes once encoded, cycling through ``names``."""
    items, size, index = [], 0, 0
    while size < width:
        name = names[index % len(names)]
        items.append(name)
        size += len(name) + 3
        index += 1
    return items


def shapes(world, row):
    items = sorted(world.recipes)
    wide = game.LINE_LIMIT - 200  # room for the record's own fields and a six-digit seq
    per_line = game.LOG_LIMIT // game.RECORD_LIMIT - 60  # bytes of payload when every record is used
    target = max(world.recipes, key=lambda item: len(world.recipes[item][0][1]))
    nested = 0
    for _ in range(game.CONTAINER_LIMIT - 4):
        nested = [nested]
    many_names = ["i%d" % n for n in range(wide // 10)]
    yield "tiny records (view_inventory)", fill(lambda seq: ("view_inventory", {}))
    yield "one distinct get_info name a record", fill(lambda seq: ("get_info", {"items": ["n%d" % seq]}))
    real = padded_items(items, wide)
    yield "get_info, 64 KiB of real item names a record", fill(lambda seq: ("get_info", {"items": real}))
    ones = ["a"] * (wide // 4)
    yield "get_info, 64 KiB of one-letter names a record", fill(lambda seq: ("get_info", {"items": ones}))
    long_name = "\u00e9" * (wide // 6)
    yield "get_info, one 64 KiB escaped name a record", fill(lambda seq: ("get_info", {"items": [long_name]}))
    wide_craft = {name: 1 for name in many_names[: wide // 10]}
    yield "rejected craft, 64 KiB of ingredients a record", fill(lambda seq: ("craft", {"ingredients": wide_craft, "target": [target, 1]}, False))
    small = {"i%d" % n: 1 for n in range(per_line // 9)}
    yield "rejected craft, every record used", fill(lambda seq: ("craft", {"ingredients": small, "target": [target, 1]}, False))
    yield "rejected craft, nested %d deep" % game.CONTAINER_LIMIT, fill(
        lambda seq: ("craft", {"ingredients": {"x": nested}, "target": [target, 1]}, False)
    )
    steps = list(records.gold_steps(row))
    gold = [("craft", {"ingredients": ingredients, "target": [item, total]}, True) for item, total, ingredients in steps]
    yield "gold episode, then finish (reward 1.0)", b"".join(
        game.format_record(n, *call) for n, call in enumerate(gold + [("finish", {"message": "done"})], 1)
    )
    # The attacks of issue 9 as first found, now cut short by the caps.
    yield "one 32 MiB get_info record (4.19 M items)", ('{"seq":1,"tool":"get_info","args":{"items":[' + ",".join(['"a1"'] * 4190000) + "]}}\n").encode()[: game.LOG_LIMIT - 1] + b"\n"
    deep = b'{"seq":1,"tool":"craft","args":{"ingredients":{},"target":["x",' + b"[" * 30000 + b"]" * 30000 + b']},"ok":false}\n'
    yield "30,000-deep nesting in one 60 KiB line", deep


# Runs the game file as __main__, then prints the peak RSS of this process since its exec.
WRAPPER = """
import runpy, sys
game = sys.argv[1]
sys.argv = [game] + sys.argv[2:]
try:
    runpy.run_path(game, run_name="__main__")
    code = 0
except SystemExit as stop:
    code = stop.code
with open("/proc/self/status") as status:
    peak = [line.split()[1] for line in status if line.startswith("VmHWM")][0]
sys.stderr.write("peak-kib %s\\n" % peak)
sys.exit(code)
"""


def run_once(root: Path, out: Path):
    tests = root / "tests"
    command = [sys.executable, "-I", "-c", WRAPPER, str(tests / "textcraft_game.py"), "verify", "--task", str(tests / "task.json"),
               "--recipes", str(tests / "recipes.json"), "--root", str(root) + "/", "--log", LOG_RELPATH, "--out", str(out)]
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8
    stderr = child.stderr.read().decode()
    child.stderr.close()
    if child.returncode != 0 or "peak-kib " not in stderr:
        raise SystemExit("verify exited %d: %s" % (child.returncode, stderr))
    peak_kib = int(stderr.rsplit("peak-kib ", 1)[1].split()[0])
    verdict = json.loads((out / game.VERDICT_FILE).read_text())
    return wall, usage.ru_utime + usage.ru_stime, peak_kib / 1024.0, verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", nargs="*", help="substrings of the shapes to run")
    args = parser.parse_args()
    data = store.load_records(store.DEFAULT_DATA_DIR)
    world = game.World(data.world_document)
    row = data.tasks["train"][0]
    with tempfile.TemporaryDirectory() as tmp:
        task_dir = Path(tmp) / row["name"]
        harbor.write_task(task_dir, harbor.task_files(row, harbor.SharedBytes(data.recipes_bytes, data.world_name)))
        root = Path(tmp) / "sandbox"
        (root / "app").mkdir(parents=True)
        os.symlink(task_dir / "tests", root / "tests")  # the trusted side may be reached through links
        (root / "app" / "textcraft").mkdir()
        print("%-46s %9s %8s %7s %8s %8s %8s  %s" % ("shape", "bytes", "records", "reward", "wall s", "cpu s", "peak MB", "reason"))
        worst = [0.0, 0.0]
        for name, log in shapes(world, row):
            if args.only and not any(part in name for part in args.only):
                continue
            (root / LOG_RELPATH).write_bytes(log)
            runs = [run_once(root, root / "logs" / "verifier") for _ in range(args.runs)]
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            peak = statistics.median(r[2] for r in runs)
            verdict = runs[-1][3]
            worst = [max(worst[0], wall), max(worst[1], peak)]
            print("%-46s %9d %8s %7.1f %8.2f %8.2f %8.1f  %s" % (name, len(log), verdict["records"], verdict["reward"], wall, cpu, peak, verdict["reason"][:70]))
        print("worst: %.2f s wall, %.1f MB peak RSS (medians of %d runs; load average now %.2f)" % (worst[0], worst[1], args.runs, os.getloadavg()[0]))


if __name__ == "__main__":
    main()
