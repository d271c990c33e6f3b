"""An eval run's directory on disk: the files ``eval --out DIR`` writes, streamed so a killed run can resume.

:mod:`tcsynth.evaluate` plays the episodes; this module puts them on disk, which is a job of its own because
a run must survive being killed.  ``python -m textcraft_synth eval --agent NAME --split val --out DIR``
writes four files to ``DIR``:

* ``protocol.json``: what the run plays (agent, the options that shape episodes, config, split, limit,
  turn budget, rollouts, seed, whether turns are recorded), written first; ``--resume`` goes on only under
  the same protocol;
* ``episodes.jsonl``: one object per episode (see :func:`tcsynth.evaluate.run_episode`).  During the run each
  episode is appended, one whole flushed line, as it finishes (completion order); at the end the file is
  rewritten in task order then rollout order, atomically;
* ``summary.json``: success rates per difficulty with 95% Wilson intervals, mean turns and tool calls,
  crafts relative to gold, the depth milestones, the score and, for agents that call a server, the requests
  and tokens spent (see :func:`tcsynth.scoring.summarize`), written at the end;
* ``summary.md``: the same as a table, written at the end.

A killed run resumes with ``--resume``: the finished episodes on disk are kept (an aborted one is run again)
and only the rest are played.  Every file is replaced atomically, so a kill leaves the old bytes or the new.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from . import store
from .evaluate import EpisodeRun, EvalError, EvalRequest, Job, check_request, load_rows, protocol_document, run_episodes, run_header
from .scoring import summarize, summary_markdown

PROTOCOL_FILE = "protocol.json"
EPISODES_FILE = "episodes.jsonl"
SUMMARY_FILE = "summary.json"
SUMMARY_MD_FILE = "summary.md"
OUTPUT_FILES = (PROTOCOL_FILE, EPISODES_FILE, SUMMARY_FILE, SUMMARY_MD_FILE)
# A file being replaced is written under this name first (a run killed meanwhile may leave one behind).
_TEMPORARY = ".%s.tmp"


def result_files(runs: Sequence[EpisodeRun], summary: Mapping[str, Any]) -> Dict[str, bytes]:
    """The bytes of the three output files."""
    return {
        EPISODES_FILE: "".join(run.line + "\n" for run in runs).encode("ascii"),
        SUMMARY_FILE: summary_json(summary),
        SUMMARY_MD_FILE: summary_markdown(summary).encode("utf-8"),
    }


def summary_json(summary: Mapping[str, Any]) -> bytes:
    return (json.dumps(summary, ensure_ascii=True, sort_keys=True, indent=1, allow_nan=False) + "\n").encode("ascii")


def _ours(name: str) -> bool:
    return name in OUTPUT_FILES or any(name == _TEMPORARY % known for known in OUTPUT_FILES)


def check_output_dir(out: Path, force: bool = False, resume: bool = False) -> None:
    """Refuse an output path that is a file, holds anything but eval output, or holds a run (unless ``force``
    or ``resume``)."""
    out = Path(out)
    if force and resume:
        raise EvalError("--force and --resume do not combine: --force starts over, --resume goes on")
    if out.exists() or out.is_symlink():
        if not out.is_dir() or out.is_symlink():
            raise EvalError("%s exists and is not a directory" % out)
        present = sorted(p.name for p in out.iterdir())
        foreign = [name for name in present if not _ours(name)]
        if foreign:
            raise EvalError("%s holds files that are not eval output (%s); choose another --out" % (out, ", ".join(foreign[:3])))
        if present and not (force or resume):
            raise EvalError("%s already holds an eval run; pass --resume to finish it, --force to replace it, or choose another --out" % out)
    elif out.parent.exists() and not out.parent.is_dir():
        raise EvalError("%s cannot be made: %s is not a directory" % (out, out.parent))


def write_results(out: Path, files: Mapping[str, bytes], force: bool = False) -> None:
    """Write the output directory whole, or not at all (see :func:`check_output_dir`)."""
    check_output_dir(out, force)
    store.replace_directory(Path(out), files)


# ------------------------------------------------------------------------------------- streaming and resume


def _write_atomically(path: Path, data: bytes) -> None:
    """``path`` holds ``data`` or what it held before: written to a temporary sibling, fsynced, renamed."""
    temporary = path.with_name(_TEMPORARY % path.name)
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


class EpisodeLog:
    """``episodes.jsonl`` while a run goes on: each finished episode appended as one whole, flushed line.

    It remembers where each episode's line is, so the final file in task order is copied from it without
    holding every line in memory.
    """

    def __init__(self, path: Path, kept: Sequence[Tuple[Job, str]] = ()) -> None:
        self.path = Path(path)
        self.where: Dict[Job, Tuple[int, int]] = {}
        # Start from the kept lines only (a resumed run drops a torn last line and the aborted episodes).
        _write_atomically(self.path, b"")
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        for job, line in kept:
            self.append(job, line)

    def append(self, job: Job, line: str) -> None:
        data = (line + "\n").encode("ascii")
        offset = os.lseek(self._fd, 0, os.SEEK_END)
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        self.where[job] = (offset, len(data))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def finish(self, order: Sequence[Job]) -> None:
        """Rewrite the file with the episodes in ``order`` (task order), atomically, and close it."""
        self.close()
        temporary = self.path.with_name(_TEMPORARY % self.path.name)
        with open(self.path, "rb") as source, open(temporary, "wb") as target:
            for job in order:
                offset, size = self.where[job]
                source.seek(offset)
                target.write(source.read(size))
            target.flush()
            os.fsync(target.fileno())
        os.replace(temporary, self.path)


def finished_episodes(out: Path, jobs: Mapping[Tuple[str, int], Job]) -> List[Tuple[Job, str, Dict[str, Any]]]:
    """The finished episodes an earlier run left in ``out/episodes.jsonl``: ``(job, line, outcome)``.

    A last line without its newline (the run was killed while writing it), an aborted episode (to be run
    again) and a second line for the same episode are dropped; a line of an episode this protocol does not
    play is refused.
    """
    path = Path(out) / EPISODES_FILE
    if not path.exists():
        return []
    kept: Dict[Job, Tuple[str, Dict[str, Any]]] = {}
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.endswith(b"\n"):
                break  # torn by the kill
            line = raw[:-1].decode("ascii")
            try:
                record = json.loads(line)
                key = (record["name"], record["rollout"])
            except (ValueError, KeyError, TypeError):
                raise EvalError("%s line %d is not an episode record; pass --force to start over" % (path, number))
            if key not in jobs:
                raise EvalError("%s holds an episode this run does not play (%s, rollout %s); pass --force to start over" % (path, key[0], key[1]))
            if record.get("aborted") or jobs[key] in kept:
                continue
            record.pop("turns", None)
            kept[jobs[key]] = (line, record)
    return [(job, line, record) for job, (line, record) in kept.items()]


def _differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> List[str]:
    return ["%s %s, now %s" % (key, json.dumps(old.get(key), sort_keys=True), json.dumps(new.get(key), sort_keys=True))
            for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]


def start_run(out: Path, request: EvalRequest, force: bool = False, resume: bool = False) -> Optional[Dict[str, Any]]:
    """Make ``out`` ready for a run: ``None`` for a fresh start, or the earlier run's ``protocol.json``.

    A fresh start clears ``out`` (with ``force``) and writes ``protocol.json``; a resume checks that the
    protocol matches.  Every refusal is an :class:`EvalError` raised before anything is changed.
    """
    out = Path(out)
    check_output_dir(out, force, resume)
    document = protocol_document(request)
    present = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if resume and present:
        try:
            earlier = json.loads((out / PROTOCOL_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise EvalError("%s holds no %s, so it cannot be resumed; pass --force to start over" % (out, PROTOCOL_FILE))
        except ValueError:
            raise EvalError("%s/%s is not JSON; pass --force to start over" % (out, PROTOCOL_FILE))
        if earlier != document:
            raise EvalError("%s was run under another protocol (%s); resume with the same options, or pass --force to start over" % (out, "; ".join(_differences(earlier, document))))
        return earlier
    out.mkdir(parents=True, exist_ok=True)
    for name in present:
        (out / name).unlink()
    _write_atomically(out / PROTOCOL_FILE, summary_json(document))
    return None


def run_into(request: EvalRequest, out: Path, force: bool = False, resume: bool = False, progress: bool = True) -> Dict[str, Any]:
    """Run the request into ``out`` as it goes (see the module docstring); returns the summary.

    Episodes are appended to ``episodes.jsonl`` as they finish; with ``resume`` the finished episodes of an
    earlier run under the same protocol are kept and only the others are played.
    """
    check_request(request)
    request.spec.build()  # bad options stop here, before --out is touched
    check_output_dir(out, force, resume)
    rows, world_document = load_rows(request)
    jobs = {(row["name"], rollout): (position, rollout) for position, row in enumerate(rows) for rollout in range(request.protocol.rollouts)}
    resumed = start_run(out, request, force, resume) is not None
    kept = finished_episodes(out, jobs) if resumed else []
    log = EpisodeLog(Path(out) / EPISODES_FILE, [(job, line) for job, line, _ in kept])
    try:
        def on_finish(job: Job, run: EpisodeRun) -> EpisodeRun:
            log.append(job, run.line)
            return EpisodeRun(run.outcome, "")  # the line is on disk; keep only the outcome in memory

        runs = run_episodes(
            rows, world_document, request.spec, request.protocol, request.workers, progress, request.record_turns,
            concurrency=request.concurrency, finished={job: EpisodeRun(outcome, "") for job, _, outcome in kept}, on_finish=on_finish,
        )
    finally:
        log.close()
    log.finish(sorted(jobs.values()))
    summary = summarize([run.outcome for run in runs], run_header(request))
    _write_atomically(Path(out) / SUMMARY_FILE, summary_json(summary))
    _write_atomically(Path(out) / SUMMARY_MD_FILE, summary_markdown(summary).encode("utf-8"))
    return summary
