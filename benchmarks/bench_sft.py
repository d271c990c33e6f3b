"""How long building the sft configs takes: every task rendered, replayed and written as Parquet.

    python benchmarks/bench_sft.py [--runs 3]

Each run starts cold (no cached conversations) and builds the Parquet bytes of ``sft`` and ``sft-<difficulty>``
for both splits, as ``python -m textcraft_synth build`` does; the medians of the runs are printed.  The
reference implementation (platoon-textcraft 0.3.0) ships no SFT export, so there is nothing to compare with.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tcsynth import build, configs, sft, store  # noqa: E402

SFT_CONFIGS = [name for name in configs.CONFIGS if name == "sft" or name.startswith("sft-")]


def build_once(data: store.Records) -> tuple:
    """Seconds to render every conversation, seconds to write every sft Parquet file, total bytes."""
    sft.clear_cache()
    started = time.perf_counter()
    for split in ("train", "val"):
        sft.sft_rows(data, split)
    rendered = time.perf_counter()
    size = 0
    for name in SFT_CONFIGS:
        spec = configs.CONFIGS[name]
        for split in spec.splits:
            size += len(store.parquet_bytes(build.config_rows(spec, data, split), spec.arrow_schema))
    return rendered - started, time.perf_counter() - rendered, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs to take the median of (default: %(default)s)")
    args = parser.parse_args()
    data = store.load_records()
    tasks = sum(len(rows) for rows in data.tasks.values())
    runs = [build_once(data) for _ in range(args.runs)]
    render = statistics.median(run[0] for run in runs)
    write = statistics.median(run[1] for run in runs)
    total = statistics.median(run[0] + run[1] for run in runs)
    print("sft configs (%s), %d tasks, %d runs" % (", ".join(SFT_CONFIGS), tasks, args.runs))
    print("  render + replay  median %6.2f s" % render)
    print("  parquet bytes    median %6.2f s  (%.1f MB)" % (write, runs[0][2] / 1e6))
    print("  total            median %6.2f s  (limit 30 s)" % total)


if __name__ == "__main__":
    main()
