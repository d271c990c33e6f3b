"""Is the eval runner the bottleneck?  ``eval --agent openai`` against a loopback stand-in with a set latency.

    python benchmarks/bench_eval_server.py [--latency 0.5] [--concurrency 1 8 64 256] [--runs 1]

The stand-in (:class:`StandIn`) is an OpenAI-compatible ``/chat/completions`` endpoint on 127.0.0.1 that
waits ``latency`` seconds per request and then answers as the batched planner would: it replays the
conversation it was sent through :class:`tcsynth.agents.PlannerAgent` and returns the planner's next turn
as tool calls, so every episode has several turns and ends in a success.  It runs in its own process, with a
thread per connection, HTTP/1.1 keep-alive and a ``usage`` in every reply.

For each N the whole command ``python -m textcraft_synth eval --agent openai --concurrency N`` runs in a
fresh process on the first ``max(16, 4 N)`` val tasks (at most 632), and the table gives:

* ``wall``: the whole command, start-up (imports, reading data/) included;
* ``serving``: from the stand-in's first request to its last reply (the runner's part, start-up excluded);
* ``ideal``: requests x latency / N, what a runner that costs nothing would take, and at least the
  longest episode's turns x latency;
* ``peak RSS``: the eval process's maximum resident set (``wait4``).

Goal (issue 11): ``serving`` within 2x of ``ideal`` at N = 64, and a peak RSS that stays flat as N grows.
The stand-in is also what ``tests/test_eval_resume.py`` kills a run against.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def planner_reply(request: Dict[str, Any]) -> Dict[str, Any]:
    """The batched planner's next assistant message for the conversation in ``request``, as tool calls."""
    from tcsynth.agents import PlannerAgent

    messages = request["messages"]
    planner = PlannerAgent(calls_per_turn=None)
    planner.reset({"messages": messages[:2], "tools": request.get("tools", [])}, {}, rng=random.Random(0))
    observations: List[Dict[str, Any]] = []
    turn = 0
    for message in messages[2:]:
        if message["role"] == "assistant":
            planner.act(observations)  # the planner is deterministic: this is the turn the client played
            observations, turn = [], turn + 1
        else:
            observations.append(message)
    action = planner.act(observations).action
    calls = [
        {"id": "call_%d_%d" % (turn, number), "type": "function",
         "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}
        for number, call in enumerate(action)
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


class StandIn:
    """A chat-completions stand-in on 127.0.0.1 that answers as the planner after ``latency`` seconds.

    ``log`` holds ``(seed, messages sent, arrival time)`` per request; ``first``/``last`` the time of the
    first request and the last reply.  ``start()`` serves in a thread of this process; ``port`` is set then.
    """

    def __init__(self, latency: float = 0.0, port: int = 0) -> None:
        self.latency = latency
        self.log: List[Tuple[int, int, float]] = []
        self.first: Optional[float] = None
        self.last: Optional[float] = None
        self._lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as vLLM and the providers serve
            # Headers and body in one write, sent at once (no Nagle / delayed-ACK stall of ~40 ms a reply).
            wbufsize = 1 << 16
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                arrived = time.monotonic()
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with stand_in._lock:
                    stand_in.log.append((body.get("seed"), len(body["messages"]), arrived))
                    stand_in.first = arrived if stand_in.first is None else stand_in.first
                message = planner_reply(body)
                time.sleep(max(0.0, stand_in.latency - (time.monotonic() - arrived)))
                reply = {
                    "id": "chatcmpl-standin", "object": "chat.completion", "model": body.get("model"),
                    "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                    # Deterministic token counts, so usage totals can be checked.
                    "usage": {"prompt_tokens": len(body["messages"]), "completion_tokens": len(message["tool_calls"])},
                }
                payload = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                with stand_in._lock:
                    stand_in.last = time.monotonic()

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 1024  # 256 clients connect at once

            def handle_error(self, request: Any, client_address: Any) -> None:
                if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):  # a client killed or gone: expected
                    super().handle_error(request, client_address)

        self.server = Server(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.base_url = "http://127.0.0.1:%d/v1" % self.port

    def start(self) -> "StandIn":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve(latency: float) -> None:
    """``--serve``: print the port, then one JSON line of figures per ``report`` read on stdin."""
    stand_in = StandIn(latency).start()
    print(stand_in.port, flush=True)
    for line in sys.stdin:
        if line.strip() == "report":
            with stand_in._lock:
                figures = {"requests": len(stand_in.log), "first": stand_in.first, "last": stand_in.last,
                           "turns": _max_turns(stand_in.log)}
                stand_in.log.clear()
                stand_in.first = stand_in.last = None
            print(json.dumps(figures), flush=True)


def _max_turns(log: List[Tuple[int, int, float]]) -> int:
    per_episode: Dict[Any, int] = {}
    for seed, _, _ in log:
        per_episode[seed] = per_episode.get(seed, 0) + 1
    return max(per_episode.values(), default=0)


def one_run(server: subprocess.Popen, base_url: str, concurrency: int, tasks: int, latency: float) -> Dict[str, float]:
    with tempfile.TemporaryDirectory() as scratch:
        command = [sys.executable, "-m", "textcraft_synth", "eval", "--agent", "openai", "--model", "stand-in",
                   "--base-url", base_url, "--limit", str(tasks), "--concurrency", str(concurrency), "--no-turns",
                   "--out", os.path.join(scratch, "out"), "-q"]
        start = time.perf_counter()
        child = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            raise SystemExit("eval failed with status %d" % child.returncode)
        summary = json.loads(Path(scratch, "out", "summary.json").read_text())
    server.stdin.write("report\n")
    server.stdin.flush()
    figures = json.loads(server.stdout.readline())
    ideal = max(figures["requests"] * latency / concurrency, figures["turns"] * latency)
    return {"wall": wall, "serving": figures["last"] - figures["first"], "ideal": ideal, "rss_mb": usage.ru_maxrss / 1024,
            "requests": figures["requests"], "solved": summary["overall"]["successes"], "episodes": summary["overall"]["episodes"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per reply (default: %(default)s)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64, 256], help="N values (default: 1 8 64 256)")
    parser.add_argument("--runs", type=int, default=1, help="runs per N; medians are printed (default: %(default)s)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.latency)
        return 0
    server = subprocess.Popen([sys.executable, __file__, "--serve", "--latency", str(args.latency)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        base_url = "http://127.0.0.1:%s/v1" % server.stdout.readline().strip()
        print("eval --agent openai against a stand-in answering in %.2f s (the batched planner's turns); cpus: %d" % (args.latency, os.cpu_count() or 0))
        print("| N | episodes | requests | wall s | serving s | ideal s | serving / ideal | peak RSS MB |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for concurrency in args.concurrency:
            tasks = min(632, max(16, 4 * concurrency))
            runs = [one_run(server, base_url, concurrency, tasks, args.latency) for _ in range(args.runs)]
            median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
            assert all(run["solved"] == run["episodes"] for run in runs), "the stand-in's episodes should all succeed"
            print("| %d | %d | %d | %.2f | %.2f | %.2f | %.2f | %.0f |" % (concurrency, median["episodes"], median["requests"], median["wall"],
                  median["serving"], median["ideal"], median["serving"] / median["ideal"], median["rss_mb"]), flush=True)
    finally:
        server.stdin.close()
        server.terminate()
        server.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
