"""Benchmark: ``python -m textcraft_synth build`` (every config, the root index files), whole command.

    python benchmarks/bench_build.py [--runs 5] [--before DIR] [--required-only]

Each run rebuilds a copy of ``data/`` in a temporary directory (``--data-dir``, ``--index-dir``), so the
checkout is not touched, and checks that the rebuilt files are byte for byte the committed ones.
``--required-only`` leaves the optional configs (``sft-recursive``) out of the copy, so ``build`` does not
rebuild them.  Printed:
the median wall time and the median CPU time (user + sys, the build's second process included), which
moves less than wall time on a shared machine.  ``--before DIR`` times another checkout the same way,
alternating with this one (for a before/after table).
"""

from __future__ import annotations

import argparse
import filecmp
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


sys.path.insert(0, str(REPO))
from tcsynth.configs import CONFIGS  # noqa: E402

OPTIONAL_CONFIGS = tuple(name for name, spec in CONFIGS.items() if spec.optional)


def build_once(checkout: Path, workdir: Path, required_only: bool = False) -> Tuple[float, float]:
    """(wall seconds, CPU seconds) of one build of a fresh copy of ``checkout``'s data/."""
    target = workdir / "copy"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(checkout / "data", target / "data", symlinks=True, ignore=shutil.ignore_patterns(*OPTIONAL_CONFIGS) if required_only else None)
    command = [sys.executable, "-m", "textcraft_synth", "build", "-q", "--data-dir", str(target / "data"), "--index-dir", str(target)]
    cpu, start = children_cpu(), time.perf_counter()
    result = subprocess.run(command, cwd=checkout, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, children_cpu() - cpu
    if result.returncode != 0:
        raise RuntimeError("%s failed:\n%s" % (" ".join(command), result.stderr[-2000:]))
    changed = [name for name in _files(target / "data") if not filecmp.cmp(checkout / "data" / name, target / "data" / name, shallow=False)]
    if changed:
        raise RuntimeError("the build in %s changed %s" % (checkout, ", ".join(changed)))
    return wall, cpu


def _files(root: Path) -> List[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--before", help="another checkout to time the same way (e.g. a git worktree of an older commit)")
    parser.add_argument("--required-only", action="store_true", help="leave the optional configs out (%s)" % ", ".join(OPTIONAL_CONFIGS))
    args = parser.parse_args()
    checkouts = {"this checkout": REPO}
    if args.before:
        checkouts["before (%s)" % args.before] = Path(args.before).resolve()
    times: Dict[str, List[Tuple[float, float]]] = {name: [] for name in checkouts}
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        for run in range(args.runs):
            for name, checkout in checkouts.items():
                times[name].append(build_once(checkout, Path(tmp), args.required_only))
            print("run %d: %s" % (run + 1, ", ".join("%s %.2f s (cpu %.2f s)" % (name, *values[-1]) for name, values in times.items())))
    print("median of %d runs, build of %s (whole command):" % (args.runs, "the required configs" if args.required_only else "every config"))
    for name, values in times.items():
        print("  %-40s wall %6.2f s   cpu (user+sys) %6.2f s" % (name, statistics.median(v[0] for v in values), statistics.median(v[1] for v in values)))
    print("  (the goal: under 7 s wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
