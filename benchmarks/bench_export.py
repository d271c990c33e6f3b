"""Benchmark: export all 3,154 tasks as Harbor tasks, median of 5 runs (wall time of the whole command).

    python benchmarks/bench_export.py [--runs 5] [--workdir DIR]

With TEXTCRAFT_REFERENCE set to the unpacked platoon-textcraft 0.3.0 wheel, the reference exporter
(``python -m platoon_textcraft.harbor export``) runs side by side, alternating with ours, under the
interpreter TEXTCRAFT_REFERENCE_PYTHON (default: this one; it needs the reference's own dependency
``openreward`` installed).  The issue asks for ours to be at least 6x faster.  Besides wall time, the
median CPU time (user + sys of the command and its children) is printed: it moves less on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


CPU: Dict[str, List[float]] = {}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: List[str], out: Path, env: Optional[Dict[str, str]] = None, cwd: Optional[Path] = None, name: str = "") -> float:
    if out.exists():
        shutil.rmtree(out)
    os.sync()  # the previous run's writes and deletes must not land in this run's time
    cpu = _children_cpu()
    start = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError("%s failed:\n%s" % (" ".join(command), result.stderr[-2000:]))
    CPU.setdefault(name, []).append(_children_cpu() - cpu)
    return elapsed


def in_process_export(out: Path) -> float:
    """The export function alone (records already loaded), for the breakdown."""
    from tcsynth import harbor, store

    data = store.load_records()
    if out.exists():
        shutil.rmtree(out)
    os.sync()
    start = time.perf_counter()
    harbor.export_harbor(out, data)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", help="where the exports go (default: a temporary directory)")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-export-"))
    workdir.mkdir(parents=True, exist_ok=True)
    ours_command = [sys.executable, "-m", "textcraft_synth", "export-harbor", str(workdir / "ours"), "-q"]
    # The same command line without importing the ``datasets`` builder module (~0.8 s of imports).
    cli_command = [sys.executable, "-c", "import sys; from tcsynth.cli import main; sys.exit(main())",
                   "export-harbor", str(workdir / "ours"), "-q"]
    reference = os.environ.get("TEXTCRAFT_REFERENCE")
    reference_command = None
    reference_env = None
    if reference:
        reference_python = os.environ.get("TEXTCRAFT_REFERENCE_PYTHON", sys.executable)
        reference_command = [reference_python, "-m", "platoon_textcraft.harbor", "export", "--out", str(workdir / "reference")]
        reference_env = dict(os.environ, PYTHONPATH=reference)
    times: Dict[str, List[float]] = {
        "ours": [],
        "reference": [],
        "ours via tcsynth.cli": [],
        "ours (export function only)": [],
    }
    try:
        for run in range(args.runs):
            times["ours"].append(timed(ours_command, workdir / "ours", cwd=REPO, name="ours"))
            if reference_command:
                try:
                    times["reference"].append(timed(reference_command, workdir / "reference", env=reference_env, name="reference"))
                except RuntimeError as error:
                    print("reference exporter did not run (%s); set TEXTCRAFT_REFERENCE_PYTHON to an interpreter "
                          "with openreward installed" % str(error).splitlines()[-1], file=sys.stderr)
                    reference_command = None
            times["ours via tcsynth.cli"].append(timed(cli_command, workdir / "ours", cwd=REPO, name="ours via tcsynth.cli"))
            times["ours (export function only)"].append(in_process_export(workdir / "ours"))
            print("run %d: %s" % (run + 1, ", ".join("%s %.2f s" % (k, v[-1]) for k, v in times.items() if len(v) > run)))
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    medians = {name: statistics.median(values) for name, values in times.items() if values}
    print("median of %d runs, 3,154 tasks:" % args.runs)
    for name, value in medians.items():
        cpu = " (cpu %.2f s)" % statistics.median(CPU[name]) if CPU.get(name) else ""
        print("  %-34s %6.2f s%s" % (name, value, cpu))
    if "reference" in medians:
        print("  speed-up, python -m textcraft_synth  %5.1fx (the issue asks for >= 6x)" % (medians["reference"] / medians["ours"]))
        print("  speed-up in cpu time                 %5.1fx" % (statistics.median(CPU["reference"]) / statistics.median(CPU["ours"])))
        print("  speed-up, via tcsynth.cli            %5.1fx" % (medians["reference"] / medians["ours via tcsynth.cli"]))
    else:
        print("  reference not run (set TEXTCRAFT_REFERENCE); the issue measured it at 12.2 s on this machine")
    return 0


if __name__ == "__main__":
    sys.exit(main())
