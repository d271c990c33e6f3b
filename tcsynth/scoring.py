"""The summary of an eval run: success rates with Wilson intervals, the depth-milestone score, usage.

Pure functions of the episode records (see :func:`tcsynth.evaluate.run_episode`); the run directory
(:mod:`tcsynth.eval_dir`) writes what :func:`summarize` returns as ``summary.json`` and
:func:`summary_markdown` as ``summary.md``.  The score is described in :mod:`tcsynth.evaluate`.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from . import records, recursive_env
from .env import NO_LIMIT

MILESTONES = tuple(range(1, records.MAX_DEPTH + 1))
WILSON_Z = 1.959963984540054  # the 97.5% quantile of the standard normal: a two-sided 95% interval
DIGITS = 4


def wilson_interval(successes: int, trials: int, z: float = WILSON_Z) -> Tuple[float, float]:
    """The Wilson score interval of a binomial rate (Wilson, 1927); (0, 1) when there are no trials."""
    if trials == 0:
        return 0.0, 1.0
    rate = successes / trials
    denominator = 1 + z * z / trials
    centre = (rate + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def crafter_score(rates: Iterable[float]) -> float:
    """Crafter's score of achievement rates in [0, 1]: exp(mean ln(1 + 100 p)) - 1, from 0 to 100."""
    rates = list(rates)
    if not rates:
        return 0.0
    return math.exp(sum(math.log1p(100.0 * rate) for rate in rates) / len(rates)) - 1.0


def _round(value: float) -> float:
    return round(value, DIGITS) + 0.0  # + 0.0 turns -0.0 into 0.0


def group_stats(episodes: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """Success rate with its interval, means of turns and tool calls, crafts relative to gold."""
    n = len(episodes)
    wins = sum(1 for e in episodes if e["reward"] == 1.0)
    low, high = wilson_interval(wins, n)
    solved = [e for e in episodes if e["reward"] == 1.0]
    gold = sum(e["gold_crafts"] for e in episodes)
    return {
        "episodes": n,
        "successes": wins,
        "success_rate": _round(wins / n) if n else 0.0,
        "ci95": [_round(low), _round(high)],
        "truncated": sum(1 for e in episodes if e["truncated"]),
        "mean_steps": _round(sum(e["steps"] for e in episodes) / n) if n else 0.0,
        "mean_tool_calls": _round(sum(e["tool_calls"] for e in episodes) / n) if n else 0.0,
        # Accepted crafts over the gold trajectory's crafts: all episodes pooled, and the mean on solved ones.
        "crafts_over_gold": _round(sum(e["crafts"] for e in episodes) / gold) if gold else 0.0,
        "crafts_over_gold_solved": _round(sum(e["crafts"] / e["gold_crafts"] for e in solved) / len(solved)) if solved else None,
    }


def milestone_rates(episodes: Sequence[Mapping[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """For each depth milestone some episode could reach: eligible episodes, how many reached it, the rate."""
    table = {}
    for depth in MILESTONES:
        eligible = [e for e in episodes if e["target_depth"] >= depth]
        if eligible:
            reached = sum(1 for e in eligible if e["depth_reached"] >= depth)
            table[str(depth)] = {"eligible": len(eligible), "reached": reached, "rate": _round(reached / len(eligible))}
    return table


def summarize(episodes: Sequence[Mapping[str, Any]], header: Mapping[str, Any]) -> Dict[str, Any]:
    """The summary of a run: ``header`` (agent, options, split, protocol) plus the statistics."""
    by_difficulty = {
        difficulty: group_stats([e for e in episodes if e["difficulty"] == difficulty])
        for difficulty in records.DIFFICULTIES
        if any(e["difficulty"] == difficulty for e in episodes)
    }
    milestones = milestone_rates(episodes)
    summary = dict(header)
    summary.update(
        tasks=len({e["name"] for e in episodes}),
        overall=group_stats(episodes),
        by_difficulty=by_difficulty,
        milestones=milestones,
        # The rates are rounded first, so the score follows from the file's own numbers.
        score=_round(crafter_score(m["rate"] for m in milestones.values())),
        aborted=sum(1 for e in episodes if e["aborted"]),
        # Why episodes stopped early, most common first (an unreachable server shows here, not as failures).
        abort_reasons=[[reason, count] for reason, count in _counted(e["aborted"] for e in episodes if e["aborted"])],
    )
    usage = usage_totals(episodes)
    if usage is not None:
        summary["usage"] = usage
    if any("subagents" in e for e in episodes):  # recursive agents: see tcsynth.recursive_env
        summary["delegation"] = recursive_env.delegation_summary(episodes)
    return summary


def usage_totals(episodes: Sequence[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """Requests and tokens over the episodes that report ``usage`` (``None`` when none does).

    A token total is ``None`` when no reply reported it (a server without ``usage`` in its replies).
    """
    reported = [e["usage"] for e in episodes if e.get("usage") is not None]
    if not reported:
        return None

    def total(key: str) -> Optional[int]:
        values = [u[key] for u in reported if u.get(key) is not None]
        return sum(values) if values else None

    return {"requests": total("requests") or 0, "prompt_tokens": total("prompt_tokens"), "completion_tokens": total("completion_tokens")}


def _counted(values: Iterable[str]) -> List[Tuple[str, int]]:
    counts: Dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def _percent(rate: Optional[float]) -> str:
    return "n/a" if rate is None else "%.1f" % (100 * rate)


def summary_markdown(summary: Mapping[str, Any]) -> str:
    """The summary as Markdown: one row per difficulty and one for all."""
    lines = [
        "# eval: %s on %s/%s" % (summary["agent"], summary["config"], summary["split"]),
        "",
        "%d tasks x %d rollouts, turn budget %s, seed %d; score %.1f (depth milestones, Crafter-style)."
        % (summary["tasks"], summary["rollouts"], budget_label(summary["max_steps"]), summary["seed"], summary["score"]),
        "",
        "| difficulty | episodes | success % | 95% CI | truncated | mean turns | mean tool calls | crafts / gold |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    groups = list(summary["by_difficulty"].items()) + [("all", summary["overall"])]
    for label, stats in groups:
        low, high = stats["ci95"]
        lines.append(
            "| %s | %d | %s | %s-%s | %d | %.1f | %.1f | %.2f |"
            % (label, stats["episodes"], _percent(stats["success_rate"]), _percent(low), _percent(high), stats["truncated"],
               stats["mean_steps"], stats["mean_tool_calls"], stats["crafts_over_gold"])
        )
    lines += ["", "| depth milestone | " + " | ".join(summary["milestones"]) + " |", "|---|" + "---:|" * len(summary["milestones"])]
    lines.append("| reached % | " + " | ".join(_percent(m["rate"]) for m in summary["milestones"].values()) + " |")
    usage = summary.get("usage")
    if usage is not None:
        tokens = lambda key: "not reported" if usage[key] is None else "{:,}".format(usage[key])  # noqa: E731
        lines += ["", "Usage: %s requests, prompt tokens %s, completion tokens %s." % ("{:,}".format(usage["requests"]), tokens("prompt_tokens"), tokens("completion_tokens"))]
    if summary.get("aborted"):
        lines += ["", "**%d of %d episodes aborted** (the agent could not go on; they count as failures):" % (summary["aborted"], summary["overall"]["episodes"]), ""]
        lines += ["- %d x %s" % (count, reason) for reason, count in summary.get("abort_reasons", [])]
    text = "\n".join(lines) + "\n"
    if summary.get("delegation"):
        text += recursive_env.delegation_markdown(summary["delegation"])
    return text


def budget_label(max_steps: Optional[int]) -> str:
    """``max_steps`` as the summary's Markdown says it."""
    return "row max_steps" if max_steps is None else "none" if max_steps == NO_LIMIT else str(max_steps)
