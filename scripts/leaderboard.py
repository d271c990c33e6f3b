"""Run the baselines under the leaderboard protocol, render the README table, plot the planner's budget curve.

    python scripts/leaderboard.py                  # run every baseline, then render and plot
    python scripts/leaderboard.py --render-only    # only re-render README.md from results/*/summary.json

The protocol (:data:`PROTOCOL`): the ``tasks`` config's ``val`` split (632 tasks), each row's turn budget
(``max_steps``, 75), 3 rollouts per task, seed 0.  Every directory ``results/<row>/`` holding a
``summary.json`` written by ``python -m textcraft_synth eval`` under that protocol is one row of the table;
a summary run under another protocol is refused, so the rows stay comparable.  The table replaces whatever
sits between ``<!-- leaderboard:start -->`` and ``<!-- leaderboard:end -->`` in README.md.

The plot ``docs/planner-budget.png`` shows the planner's success rate per difficulty against the turn
budget, one call per turn and batched; its numbers are kept in ``results/planner-budget.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tcsynth import records, store  # noqa: E402
from tcsynth.eval_dir import result_files, write_results  # noqa: E402
from tcsynth.evaluate import AgentSpec, EvalRequest, Protocol, evaluate, run_episodes  # noqa: E402

RESULTS_DIR = REPO / "results"
README = REPO / "README.md"
PLOT = REPO / "docs" / "planner-budget.png"
BUDGET_DATA = "planner-budget.json"
START_MARKER = "<!-- leaderboard:start -->"
END_MARKER = "<!-- leaderboard:end -->"

# The leaderboard protocol: what every row's summary.json must say.
PROTOCOL = {"config": "tasks", "split": "val", "limit": None, "max_steps": None, "rollouts": 3, "seed": 0}

# The baseline rows: results/<name>/ and the agent that fills it.
BASELINES: Tuple[Tuple[str, AgentSpec], ...] = (
    ("oracle-batched", AgentSpec("oracle", (("calls_per_turn", None),))),
    ("oracle", AgentSpec("oracle", (("calls_per_turn", 1),))),
    ("planner-batched", AgentSpec("planner", (("calls_per_turn", None),))),
    ("planner", AgentSpec("planner", (("calls_per_turn", 1),))),
    ("random", AgentSpec("random")),
    ("nop", AgentSpec("nop")),
)

# Turn budgets of the planner plot, and its two variants.
BUDGETS = (1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 75, 100, 150, 200, 300, 600)
PLANNER_VARIANTS = (("one call per turn", 1), ("batched", None))


class LeaderboardError(ValueError):
    """A results directory or README that the leaderboard cannot use."""


# ----------------------------------------------------------------------------------------------- the table


def load_summaries(results_dir: Path) -> Dict[str, Dict[str, Any]]:
    """``{row name: summary}`` of every ``results/<row>/summary.json``, checked against the protocol."""
    summaries = {}
    for path in sorted(Path(results_dir).glob("*/summary.json")):
        summary = json.loads(path.read_text(encoding="utf-8"))
        wrong = {key: summary.get(key) for key, value in PROTOCOL.items() if summary.get(key) != value}
        if wrong:
            raise LeaderboardError("%s was not run under the leaderboard protocol: %s" % (path, wrong))
        summaries[path.parent.name] = summary
    return summaries


def _agent_label(summary: Mapping[str, Any]) -> str:
    options = summary.get("options", {})
    if summary["agent"] == "openai":
        return "openai: `%s`" % options.get("model", "?")
    per_turn = options.get("calls_per_turn", "n/a")
    if per_turn is None:
        return "%s, batched" % summary["agent"]
    if per_turn == 1:
        return "%s, 1 call/turn" % summary["agent"]
    return summary["agent"]


def _pct(rate: float) -> str:
    return "%.1f" % (100 * rate)


def render_table(summaries: Mapping[str, Mapping[str, Any]]) -> str:
    """The leaderboard as a Markdown table: by success rate, then score (depth reached), then name."""
    lines = [
        "| rank | run | agent | success % (95% CI) | easy | medium | hard | extreme | depth score | mean turns | mean tool calls | crafts / gold |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ordered = sorted(summaries.items(), key=lambda kv: (-kv[1]["overall"]["success_rate"], -kv[1]["score"], kv[0]))
    for rank, (name, summary) in enumerate(ordered, 1):
        overall = summary["overall"]
        per = [_pct(summary["by_difficulty"][d]["success_rate"]) if d in summary["by_difficulty"] else "-" for d in records.DIFFICULTIES]
        lines.append(
            "| %d | `%s` | %s | %s (%s-%s) | %s | %.1f | %.1f | %.1f | %.2f |"
            % (rank, name, _agent_label(summary), _pct(overall["success_rate"]), _pct(overall["ci95"][0]), _pct(overall["ci95"][1]),
               " | ".join(per), summary["score"], overall["mean_steps"], overall["mean_tool_calls"], overall["crafts_over_gold"])
        )
    return "\n".join(lines) + "\n"


def replace_between_markers(text: str, table: str) -> str:
    """``text`` with the part between the leaderboard markers replaced by ``table``."""
    start, end = text.find(START_MARKER), text.find(END_MARKER)
    if start < 0 or end < 0 or end < start or text.count(START_MARKER) != 1 or text.count(END_MARKER) != 1:
        raise LeaderboardError("README must hold %s and then %s, once each" % (START_MARKER, END_MARKER))
    return text[: start + len(START_MARKER)] + "\n" + table + text[end:]


def readme_table(text: str) -> str:
    """The table currently between the markers (what :func:`replace_between_markers` put there)."""
    start, end = text.find(START_MARKER), text.find(END_MARKER)
    if start < 0 or end < start:
        raise LeaderboardError("README has no leaderboard markers")
    return text[start + len(START_MARKER) : end].lstrip("\n")


def update_readme(readme: Path, results_dir: Path) -> str:
    """Rewrite the README's table from ``results_dir``; returns the table."""
    table = render_table(load_summaries(results_dir))
    text = readme.read_text(encoding="utf-8")
    updated = replace_between_markers(text, table)
    if updated != text:
        readme.write_text(updated, encoding="utf-8")
    return table


# ------------------------------------------------------------------------------------------------ the runs


def protocol_request(spec: AgentSpec, workers: int) -> EvalRequest:
    return EvalRequest(
        spec=spec,
        split=PROTOCOL["split"],
        config=PROTOCOL["config"],
        protocol=Protocol(max_steps=PROTOCOL["max_steps"], rollouts=PROTOCOL["rollouts"], seed=PROTOCOL["seed"]),
        workers=workers,
        record_turns=False,  # outcomes only: the committed results stay small
    )


def run_baselines(results_dir: Path, workers: int) -> None:
    for name, spec in BASELINES:
        runs, summary = evaluate(protocol_request(spec, workers))
        write_results(results_dir / name, result_files(runs, summary))
        print("%-16s success %5.1f%%  score %5.1f" % (name, 100 * summary["overall"]["success_rate"], summary["score"]))


def budget_curves(workers: int, budgets: Sequence[int] = BUDGETS) -> Dict[str, Any]:
    """The planner's success rate per difficulty at each budget, both variants (one eval run per point)."""
    data = store.load_records()
    rows = data.tasks[PROTOCOL["split"]]
    curves: Dict[str, Dict[str, List[float]]] = {}
    for label, per_turn in PLANNER_VARIANTS:
        spec = AgentSpec("planner", (("calls_per_turn", per_turn),))
        curve: Dict[str, List[float]] = {difficulty: [] for difficulty in records.DIFFICULTIES}
        for budget in budgets:
            runs = run_episodes(rows, data.world_document, spec, Protocol(max_steps=budget), workers, progress=False, record_turns=False)
            episodes = [run.outcome for run in runs]
            for difficulty in records.DIFFICULTIES:
                group = [e for e in episodes if e["difficulty"] == difficulty]
                curve[difficulty].append(round(sum(e["reward"] for e in group) / len(group), 4))
        curves[label] = curve
    return {"split": PROTOCOL["split"], "budgets": list(budgets), "success_rate": curves}


def plot_budget_curves(curves: Mapping[str, Any], path: Path) -> None:
    """Success rate against turn budget, one colour per difficulty, one line style per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"easy": "tab:green", "medium": "tab:blue", "hard": "tab:orange", "extreme": "tab:red"}
    styles = {"batched": "-", "one call per turn": "--"}
    figure, axes = plt.subplots(figsize=(9.5, 4.5), dpi=120)
    for variant, _ in PLANNER_VARIANTS:
        for difficulty in records.DIFFICULTIES:
            rates = curves["success_rate"][variant][difficulty]
            axes.plot(curves["budgets"], [100 * r for r in rates], styles[variant], color=colours[difficulty], marker="o",
                      markersize=3, label="%s, %s" % (difficulty, variant))
    axes.axvline(75, color="grey", linewidth=0.8, linestyle=":")
    axes.text(73, 50, "protocol budget (75)", color="grey", fontsize=8, ha="right", va="center", rotation=90)
    axes.set_xscale("log")
    ticks = [1, 2, 5, 10, 20, 50, 75, 100, 200, 600]
    axes.set_xticks(ticks, [str(t) for t in ticks])
    axes.minorticks_off()
    axes.set_xlabel("turn budget (max_steps)")
    axes.set_ylabel("success rate on %s (%%)" % curves["split"])
    axes.set_ylim(-2, 102)
    axes.set_title("planner: success against turn budget, batched (solid) vs one call per turn (dashed)", fontsize=9)
    axes.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), handlelength=4)
    axes.grid(True, alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, metadata={"Software": None})  # no version stamp: same numbers, same bytes
    plt.close(figure)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--render-only", action="store_true", help="skip the runs; re-render README.md from results/")
    parser.add_argument("--workers", type=int, default=1, help="worker processes per eval run (default: %(default)s)")
    parser.add_argument("--readme", default=str(README), help="the README to update (default: %(default)s)")
    parser.add_argument("--results", default=str(RESULTS_DIR), help="the results directory (default: %(default)s)")
    args = parser.parse_args(argv)
    results_dir = Path(args.results)
    try:
        if not args.render_only:
            run_baselines(results_dir, args.workers)
            curves = budget_curves(args.workers)
            (results_dir / BUDGET_DATA).write_text(json.dumps(curves, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            plot_budget_curves(curves, PLOT)
        print(update_readme(Path(args.readme), results_dir), end="")
    except (LeaderboardError, ValueError, OSError) as error:
        print("error: %s" % error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
