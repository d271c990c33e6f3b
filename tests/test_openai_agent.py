"""The ``openai`` agent against a local stub of the chat-completions API (scripted replies, 127.0.0.1 only)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tcsynth import agents, cli, prompts, records
from tcsynth.agents import OpenAIAgent, RateLimiter, retry_after_seconds
from tcsynth.env import NO_TOOL_CALL
from tcsynth.evaluate import Protocol, run_episode, summarize, usage_totals


class StubAPI:
    """A chat-completions endpoint that plays a script: one entry per request, in order.

    ``keep_alive`` serves HTTP/1.1 (connections stay open between requests); an entry may add ``headers``,
    and ``drop`` closes the connection after the reply without saying so (a server's idle timeout).
    """

    def __init__(self, keep_alive=False):
        self.script = []
        self.requests = []  # (path, headers, body) per request received
        self.clients = []  # the client's (host, port) per request: one port per connection
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                stub.requests.append((self.path, dict(self.headers), json.loads(body)))
                stub.clients.append(self.client_address)
                entry = stub.script.pop(0) if stub.script else {"status": 500, "body": {"error": "script exhausted"}}
                time.sleep(entry.get("delay", 0))
                payload = entry["body"] if isinstance(entry["body"], bytes) else json.dumps(entry["body"]).encode()
                try:
                    self.send_response(entry.get("status", 200))
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in entry.get("headers", {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (the timeout case)
                if entry.get("drop"):
                    self.close_connection = True

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.base_url = "http://127.0.0.1:%d/v1" % self.server.server_address[1]

    def reply(self, content=None, tool_calls=None, usage=None, **entry):
        message = {"role": "assistant", "content": content}
        if tool_calls is not None:
            message["tool_calls"] = tool_calls
        body = {"id": "chatcmpl-stub", "object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
        if usage is not None:
            body["usage"] = usage
        self.script.append(dict(entry, body=body))

    def fail(self, status, body=None, **entry):
        self.script.append(dict(entry, status=status, body=body if body is not None else {"error": {"message": "scripted failure"}}))


@pytest.fixture(params=[False, True], ids=["http1.0", "keep-alive"])
def stub(request):
    api = StubAPI(keep_alive=request.param)
    api.thread.start()
    yield api
    api.server.shutdown()
    api.server.server_close()


@pytest.fixture
def kept_stub():
    api = StubAPI(keep_alive=True)
    api.thread.start()
    yield api
    api.server.shutdown()
    api.server.server_close()


@pytest.fixture(scope="module")
def row(data):
    return data.tasks["val"][0]


def tool_call(number, name, arguments):
    return {"id": "call_%d" % number, "type": "function",
            "function": {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}}


def gold_tool_calls(row, first=10):
    return [tool_call(first + n, c["name"], c["arguments"]) for n, c in enumerate(records.gold_tool_calls(row, "done"))]


def agent_for(stub, **options):
    options.setdefault("timeout", 5.0)
    return OpenAIAgent(model="stub-model", base_url=stub.base_url, backoff=0.0, sleep=lambda seconds: None, **options)


def test_a_successful_episode(stub, row, world, monkeypatch):
    monkeypatch.setenv("STUB_KEY", "secret-key")
    stub.reply(tool_calls=[tool_call(1, "view_inventory", {})])
    stub.reply(content="Crafting now.", tool_calls=gold_tool_calls(row))
    episode = run_episode(row, world, agent_for(stub, api_key_env="STUB_KEY", temperature=0.0), Protocol(max_steps=10))
    assert (episode["reward"], episode["terminated"], episode["steps"]) == (1.0, True, 2)
    assert episode["problems"] == [] and episode["aborted"] is None

    (path, headers, first), (_, _, second) = stub.requests
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer secret-key"
    assert first["model"] == "stub-model" and first["temperature"] == 0.0
    assert first["tools"] == prompts.TOOLS
    assert first["messages"] == [{"role": "system", "content": prompts.SYSTEM_PROMPT}, {"role": "user", "content": row["goal"]}]
    # The second request carries the assistant turn and the tool's answer, linked by the call id.
    inventory = json.dumps(records.list_to_counts(row["initial_inventory"]))
    assert second["messages"][2]["tool_calls"][0]["id"] == "call_1"
    assert second["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": inventory}


def test_malformed_replies_are_handled_and_reported(stub, row, world):
    stub.reply(tool_calls=[tool_call(1, "craft", '{"ingredients": {"raw_t1": 1}, "target": ["t8_i1", 2]')])  # bad JSON
    stub.reply(tool_calls=[tool_call(2, "teleport", {"to": "home"})])  # an unknown tool
    stub.reply(content="I will now think about crafting.")  # plain text, no tool call
    stub.fail(500)  # a server error, then the same request succeeds
    stub.reply(tool_calls=[tool_call(3, "view_inventory", {})])
    stub.reply(tool_calls=[tool_call(4, "view_inventory", {})], delay=1.5)  # too slow: the client times out
    stub.reply(content="", tool_calls=gold_tool_calls(row))  # ... and the retry succeeds
    episode = run_episode(row, world, agent_for(stub, timeout=0.5), Protocol(max_steps=10))

    assert (episode["reward"], episode["terminated"], episode["steps"], episode["aborted"]) == (1.0, True, 5, None)
    turns = episode["turns"]
    assert turns[0]["observations"][0].startswith("Error: the arguments of craft are not valid JSON")
    assert turns[1]["observations"][0].startswith("Error: unknown tool 'teleport'")
    assert turns[2]["observations"] == [NO_TOOL_CALL]
    assert turns[3]["notes"] == ["attempt 1: HTTP 500: {\"error\": {\"message\": \"scripted failure\"}}"]
    assert turns[4]["notes"] == ["attempt 1: no reply within 0.5s"]
    problems = "\n".join(episode["problems"])
    for expected in ("not valid JSON", "unknown tool", "turn 3: no tool call", "turn 4: attempt 1: HTTP 500", "turn 5: attempt 1: no reply within"):
        assert expected in problems
    # Every request was a well-formed conversation: each tool answer follows its call.
    last = stub.requests[-1][2]["messages"]
    assert [m["role"] for m in last[2:6]] == ["assistant", "tool", "assistant", "tool"]
    assert last[3]["tool_call_id"] == "call_1" and last[5]["tool_call_id"] == "call_2"
    assert last[6] == {"role": "assistant", "content": "I will now think about crafting."}
    assert last[7] == {"role": "user", "content": NO_TOOL_CALL}


def test_a_reply_that_is_not_a_completion_is_retried(stub, row, world):
    stub.script.append({"status": 200, "body": b"<html>gateway</html>"})
    stub.script.append({"status": 200, "body": {"choices": []}})
    stub.reply(tool_calls=gold_tool_calls(row))
    episode = run_episode(row, world, agent_for(stub), Protocol(max_steps=5))
    assert episode["reward"] == 1.0
    assert episode["turns"][0]["notes"] == [
        "attempt 1: the reply is not JSON: <html>gateway</html>",
        "attempt 2: the reply has no choices[0].message: {\"choices\": []}",
    ]


def test_an_endpoint_that_keeps_failing_ends_the_episode_on_record(stub, row, world):
    for _ in range(3):
        stub.fail(503)
    episode = run_episode(row, world, agent_for(stub, retries=2), Protocol(max_steps=5))
    assert episode["aborted"].startswith("no usable reply after 3 attempts: attempt 3: HTTP 503")
    assert (episode["reward"], episode["terminated"], episode["truncated"], episode["steps"]) == (0.0, False, False, 0)
    assert len(stub.requests) == 3


def test_a_client_error_is_not_retried(stub, row, world):
    stub.fail(401, {"error": {"message": "bad key"}})
    episode = run_episode(row, world, agent_for(stub), Protocol(max_steps=5))
    assert episode["aborted"].startswith("HTTP 401 from %s/chat/completions" % stub.base_url)
    assert len(stub.requests) == 1


def test_no_key_no_authorization_header(stub, row, world, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    stub.reply(tool_calls=gold_tool_calls(row))
    run_episode(row, world, agent_for(stub), Protocol(max_steps=5))
    assert "Authorization" not in stub.requests[0][1]


def test_an_unreachable_endpoint_is_reported(row, world):
    agent = OpenAIAgent(model="m", base_url="http://127.0.0.1:9/v1", retries=1, backoff=0.0, sleep=lambda s: None, timeout=2.0)
    episode = run_episode(row, world, agent, Protocol(max_steps=5))
    assert episode["aborted"].startswith("no usable reply after 2 attempts: attempt 2: cannot reach")


@pytest.mark.parametrize("options, message", [({"model": ""}, "model"), ({"model": "m", "base_url": "ftp://x"}, "base_url")])
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        OpenAIAgent(**options)


def test_eval_command_runs_the_openai_agent(stub, data, tmp_path, capsys):
    rows = data.tasks["val"][:2]
    for row in rows:
        stub.reply(tool_calls=gold_tool_calls(row))
    out = tmp_path / "run"
    status = cli.main(["eval", "--agent", "openai", "--model", "stub-model", "--base-url", stub.base_url, "--limit", "2",
                       "--timeout", "5", "--out", str(out), "-q"])
    assert status == 0, capsys.readouterr().err
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [(e["name"], e["reward"]) for e in episodes] == [(row["name"], 1.0) for row in rows]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["options"]["model"] == "stub-model" and summary["options"]["base_url"] == stub.base_url
    assert "api_key" not in json.dumps(summary).replace("api_key_env", "")


# ------------------------------------------------------------------------------- connections, waits, usage


def recording_agent(stub, **options):
    """An agent whose sleeps are recorded instead of slept."""
    slept = []
    agent = OpenAIAgent(model="stub-model", base_url=stub.base_url, backoff=0.0, sleep=slept.append, timeout=5.0, **options)
    return agent, slept


def test_requests_of_a_thread_share_one_kept_alive_connection(kept_stub, data, world):
    rows = data.tasks["val"][:2]
    for row in rows:
        kept_stub.reply(tool_calls=[tool_call(1, "view_inventory", {})])
        kept_stub.reply(tool_calls=gold_tool_calls(row))
    for row in rows:  # two episodes, one after the other in this thread
        assert run_episode(row, world, agent_for(kept_stub), Protocol(max_steps=5))["reward"] == 1.0
    assert len(kept_stub.clients) == 4 and len(set(kept_stub.clients)) == 1


def test_a_connection_the_server_dropped_is_reopened_without_a_retry(kept_stub, row, world):
    kept_stub.reply(tool_calls=[tool_call(1, "view_inventory", {})], drop=True)  # closed after the reply, unannounced
    kept_stub.reply(tool_calls=gold_tool_calls(row))
    agent, slept = recording_agent(kept_stub)
    episode = run_episode(row, world, agent, Protocol(max_steps=5))
    assert episode["reward"] == 1.0 and episode["problems"] == [] and slept == []
    assert len(set(kept_stub.clients)) == 2 and episode["usage"]["requests"] == 2


@pytest.mark.parametrize("header, wait", [("7", 7.0), ("0", 0.0), ("soon", 0.0), (None, 0.0), ("100000", agents.MAX_RETRY_AFTER_S)])
def test_retry_after_sets_the_wait(stub, row, world, header, wait):
    stub.fail(429, headers={"Retry-After": header} if header is not None else {})
    stub.reply(tool_calls=gold_tool_calls(row))
    agent, slept = recording_agent(stub)
    episode = run_episode(row, world, agent, Protocol(max_steps=5))
    assert episode["reward"] == 1.0 and slept == [wait]
    assert episode["turns"][0]["notes"][0].startswith("attempt 1: HTTP 429")


def test_backoff_doubles_and_retry_after_only_lengthens_it(stub, row, world):
    for header in ("1", None, "30"):
        stub.fail(503, headers={"Retry-After": header} if header else {})
    stub.reply(tool_calls=gold_tool_calls(row))
    slept = []
    agent = OpenAIAgent(model="m", base_url=stub.base_url, backoff=2.0, sleep=slept.append, timeout=5.0)
    assert run_episode(row, world, agent, Protocol(max_steps=5))["reward"] == 1.0
    assert slept == [2.0, 4.0, 30.0]  # max(backoff * 2^k, Retry-After)


def test_retry_after_reads_seconds_and_http_dates():
    assert retry_after_seconds("120") == 120.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0) == 0.0  # already past
    assert retry_after_seconds("-3") is None and retry_after_seconds("tomorrow") is None and retry_after_seconds(None) is None


class FakeClock:
    def __init__(self):
        self.now = 100.0
        self.slept = []

    def sleep(self, seconds):
        self.slept.append(seconds)


def test_the_rate_limiter_spaces_requests_evenly():
    clock = FakeClock()
    limiter = RateLimiter(4.0, clock=lambda: clock.now, sleep=clock.sleep)
    waits = [limiter.acquire() for _ in range(5)]
    assert waits == [0.0, 0.25, 0.5, 0.75, 1.0] and clock.slept == [0.25, 0.5, 0.75, 1.0]
    clock.now += 10  # idle time is not saved up as a burst
    assert limiter.acquire() == 0.0 and limiter.acquire() == 0.25


def test_the_rate_limiter_is_shared_by_every_thread_and_episode():
    limiter = RateLimiter(1000.0, clock=lambda: 0.0, sleep=lambda seconds: None)
    waits = []
    threads = [threading.Thread(target=lambda: waits.extend(limiter.acquire() for _ in range(50))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(round(w * 1000) for w in waits) == list(range(400))  # 400 distinct slots, 1 ms apart
    first = OpenAIAgent(model="m", base_url="http://127.0.0.1:9/v1", max_rps=2.5)
    second = OpenAIAgent(model="m", base_url="http://127.0.0.1:9/v1", max_rps=2.5)
    assert first.limiter is second.limiter and OpenAIAgent(model="m", base_url="http://127.0.0.1:9/v1").limiter is None


def test_usage_is_counted_per_episode_and_totalled(stub, row, world):
    stub.reply(tool_calls=[tool_call(1, "view_inventory", {})], usage={"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107})
    stub.fail(500)  # a request that failed still counts as a request
    stub.reply(tool_calls=gold_tool_calls(row), usage={"prompt_tokens": 150, "completion_tokens": 40})
    episode = run_episode(row, world, agent_for(stub), Protocol(max_steps=5))
    assert episode["usage"] == {"requests": 3, "prompt_tokens": 250, "completion_tokens": 47}
    silent = dict(episode, usage={"requests": 2, "prompt_tokens": None, "completion_tokens": None})
    assert usage_totals([episode, silent]) == {"requests": 5, "prompt_tokens": 250, "completion_tokens": 47}
    assert usage_totals([silent]) == {"requests": 2, "prompt_tokens": None, "completion_tokens": None}
    assert usage_totals([{k: v for k, v in episode.items() if k != "usage"}]) is None


def test_baseline_agents_report_no_usage(data, world):
    from tcsynth.agents import PlannerAgent

    episode = run_episode(data.tasks["val"][0], world, PlannerAgent(), Protocol())
    assert "usage" not in episode and "usage" not in summarize([episode], {"agent": "planner"})


def test_eval_with_every_episode_aborted_exits_1_and_says_why(tmp_path, capsys):
    out = tmp_path / "run"
    status = cli.main(["eval", "--agent", "openai", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--retries", "0",
                       "--limit", "3", "--concurrency", "3", "--out", str(out), "-q"])
    assert status == 1
    err = capsys.readouterr().err
    assert err.startswith("error: 3 of 3 episodes aborted (no usable reply after 1 attempts: attempt 1: cannot reach")
    markdown = (out / "summary.md").read_text()
    assert "**3 of 3 episodes aborted**" in markdown and "3 x no usable reply after 1 attempts" in markdown
    assert "Usage: 3 requests, prompt tokens not reported, completion tokens not reported." in markdown


def test_eval_options_for_the_endpoint(stub, data, tmp_path):
    stub.reply(tool_calls=gold_tool_calls(data.tasks["val"][0]), usage={"prompt_tokens": 9, "completion_tokens": 2})
    out = tmp_path / "run"
    assert cli.main(["eval", "--agent", "openai", "--model", "m", "--base-url", stub.base_url, "--limit", "1",
                     "--max-rps", "50", "--timeout", "5", "--concurrency", "8", "--out", str(out), "-q"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["options"]["max_rps"] == 50.0 and summary["usage"] == {"requests": 1, "prompt_tokens": 9, "completion_tokens": 2}
    protocol = json.loads((out / "protocol.json").read_text())
    assert "max_rps" not in protocol["options"] and "timeout" not in protocol["options"] and protocol["options"]["model"] == "m"


@pytest.mark.parametrize("argv, message", [(["--max-rps", "0"], "--max-rps"), (["--timeout", "-1"], "--timeout")])
def test_bad_endpoint_options_are_usage_errors(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit):
        cli.main(["eval", "--agent", "openai", "--model", "m", *argv, "--out", str(tmp_path / "x")])
    assert message in capsys.readouterr().err
