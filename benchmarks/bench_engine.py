"""Engine and data speed: gold replay (side by side with the reference when available), build, cold load.

    python benchmarks/bench_engine.py [--runs 5] [--source ../shared/source]

Set TEXTCRAFT_REFERENCE to the unpacked platoon-textcraft 0.3.0 wheel to time its engines on the same calls
and check that they print the same observations: its container engine (``harbor/game.py``, standard
library) in this process, and its in-process environment (``platoon_textcraft.env``) in the interpreter
TEXTCRAFT_REFERENCE_PYTHON, which needs the reference's dependencies (``openreward``).  Figures are
medians over --runs runs.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib.util
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

from tcsynth import build, game, records, store  # noqa: E402
from tcsynth.configs import CONFIGS  # noqa: E402


def gold_workload(data):
    """(task mapping, [craft arguments]) per task, built once so every engine is timed on the same calls."""
    work = []
    for split in records.SPLITS:
        for row in data.tasks[split]:
            calls = [c["arguments"] for c in records.gold_tool_calls(row)[:-1]]
            work.append((records.engine_task(row), calls))
    return work


def replay_ours(world, work):
    out = []
    for task, calls in work:
        call = game.Game.for_task(world, task).call
        out.extend(call("craft", arguments) for arguments in calls)
    return out


def load_reference(root: Path):
    path = root / "platoon_textcraft" / "harbor" / "game.py"
    spec = importlib.util.spec_from_file_location("reference_game", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def replay_reference(ref, book, work):
    out = []
    for task, calls in work:
        call = ref.Game(book, task).call
        out.extend(call("craft", arguments) for arguments in calls)
    return out


def digest_of(observations):
    return hashlib.sha256("\n".join(observations).encode()).hexdigest()


# Runs in the reference's interpreter (it needs the reference's own dependencies, e.g. openreward):
# times its TextCraft-Synth environment's craft tool on the same gold calls, as a black box.
_REFERENCE_ENV_SCRIPT = r"""
import gc, hashlib, json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
from platoon_textcraft.env import TextCraftSynthEnvironment as Env
tasks = json.load(open(sys.argv[2]))
gc.collect(); gc.freeze()
times = []
for _ in range(int(sys.argv[3])):
    start = time.perf_counter()
    out = []
    for spec, calls in tasks:
        env = Env(task_spec=spec)
        out.extend(env._craft(ingredients, target) for ingredients, target in calls)
    times.append(time.perf_counter() - start)
print(statistics.median(times), hashlib.sha256("\n".join(out).encode()).hexdigest())
"""


def time_reference_environment(root: Path, python: str, data, runs: int):
    """(median seconds, observation digest) of the reference environment, or (None, why not)."""
    tasks = []
    for split in records.SPLITS:
        for row in data.tasks[split]:
            spec = records.source_from_row(row)
            tasks.append((spec, [[ingredients, [item, total]] for item, total, ingredients in records.gold_steps(row)]))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tasks.json"
        path.write_text(json.dumps(tasks))
        result = subprocess.run(
            [python, "-c", _REFERENCE_ENV_SCRIPT, str(root), str(path), str(runs)], capture_output=True, text=True
        )
    if result.returncode != 0:
        return None, (result.stderr.strip().splitlines() or ["failed"])[-1]
    seconds, digest = result.stdout.split()
    return float(seconds), digest


def timed(fn, runs):
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--source", default=str(REPO.parent / "shared" / "source"))
    args = parser.parse_args()

    data = store.load_records(store.DEFAULT_DATA_DIR)
    world = game.World(data.world_document)
    work = gold_workload(data)
    crafts = sum(len(calls) for _, calls in work)
    # The loaded records are millions of long-lived objects; without this, the cyclic garbage collector's
    # full passes over them, not the engines, dominate the timings (for both engines alike).
    gc.collect()
    gc.freeze()
    ours, observations = timed(lambda: replay_ours(world, work), args.runs)
    assert all(text.startswith(game.CRAFTED_PREFIX) for text in observations)
    print("replay %d gold trajectories (%d crafts): ours %.3f s" % (len(work), crafts, ours))
    reference_root = os.environ.get("TEXTCRAFT_REFERENCE")
    if reference_root:
        ref = load_reference(Path(reference_root))
        book = ref.RecipeBook(json.loads(data.recipes_bytes))
        theirs, their_observations = timed(lambda: replay_reference(ref, book, work), args.runs)
        same = their_observations == observations
        print("  reference %.3f s; ours is %.2fx faster; same observations: %s" % (theirs, theirs / ours, same))
        env_python = os.environ.get("TEXTCRAFT_REFERENCE_PYTHON", sys.executable)
        env_seconds, env_digest = time_reference_environment(Path(reference_root), env_python, data, args.runs)
        if env_seconds is None:
            print("  reference in-process environment: not timed (%s)" % env_digest)
        else:
            same = env_digest == digest_of(observations)
            print(
                "  reference in-process environment (platoon_textcraft.env, with its env construction): %.3f s; "
                "ours is %.2fx faster; same observations: %s" % (env_seconds, env_seconds / ours, same)
            )
    else:
        print("  (set TEXTCRAFT_REFERENCE to compare with the reference engine)")

    if Path(args.source).is_dir():
        def corpus_once():
            # What build-data does for the corpus configs alone: read and check, replay, write Parquet.
            source = build.read_source(Path(args.source))
            build.verify_records(source, progress=False)
            for spec in CONFIGS.values():
                if spec.name == "sft" or spec.name.startswith("sft-"):
                    continue
                for split in spec.splits:
                    store.parquet_bytes(build.config_rows(spec, source, split), spec.arrow_schema)

        def build_once():
            with tempfile.TemporaryDirectory() as tmp:
                build.build_data(Path(args.source), Path(tmp) / "data", progress=False)

        seconds, _ = timed(corpus_once, args.runs)
        print("build-data, corpus configs (tasks, difficulties, recipes) from %s: %.2f s" % (args.source, seconds))
        seconds, _ = timed(build_once, args.runs)
        print("build-data, every config including sft: %.2f s" % seconds)

    def load_cold():
        with tempfile.TemporaryDirectory() as tmp:
            code = "from datasets import load_dataset; load_dataset(%r)" % str(REPO)
            env = dict(os.environ, HF_HOME=tmp, HF_HUB_OFFLINE="1", HF_DATASETS_DISABLE_PROGRESS_BARS="1")
            subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)

    seconds, _ = timed(load_cold, args.runs)
    print("load_dataset(checkout) cold, tasks config, new process: %.2f s" % seconds)


if __name__ == "__main__":
    main()
