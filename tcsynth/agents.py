"""Baseline agents behind one signature, and a tool-calling agent for any OpenAI-compatible endpoint.

Every agent follows :class:`Agent`: ``reset`` hands it the first observation of
:class:`tcsynth.env.TextCraftEnv` (system prompt, goal, tool schemas) and ``act`` turns the previous
turn's observation messages into the next :class:`Turn`, whose ``action`` goes to ``env.step`` as it is.

==========  ===============================================================================================
agent       what it does
==========  ===============================================================================================
``oracle``  plays the row's gold crafts (total counts), then ``finish``; the only agent given the row
``nop``     calls ``finish`` at once: the floor, and a check that reward is never free
``random``  well-formed calls with random content (seeded): looks items up, crafts a random known recipe
            at a random multiple, sometimes finishes
``planner`` reads only what the tools print: ``view_inventory``, then ``get_info`` level by level down the
            recipe tree, then crafts each needed item once with the total the tree calls for, then finishes
``openai``  a chat model behind ``/chat/completions`` with tool calling, prompted by :mod:`tcsynth.prompts`
==========  ===============================================================================================

``recursive-planner`` is the planner that hands deep subtrees to subagents (``launch_subagent``, see
:mod:`tcsynth.recursive`); the runner plays its subagents (:mod:`tcsynth.recursive_env`).

``calls_per_turn`` (oracle, planner) sets how many tool calls one turn may carry; ``None`` puts every call
the agent has ready into one turn.  :func:`make_agent` builds an agent by name.  Each agent declares its
settings in ``OPTIONS`` (:class:`Option`): the command line makes its flags from them, so adding an agent
never means editing the runner.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import os
import random
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from . import records

Message = Dict[str, Any]
ToolCall = Dict[str, Any]


@dataclass(frozen=True)
class Option:
    """One setting of an agent, as its constructor takes it and the command line offers it.

    Args:
        name (`str`): the constructor's keyword argument; the flag is ``--`` plus it with dashes.
        help (`str`): one line for ``--help``.
        type (`Callable[[str], Any]`): turns the command-line text into the value (raises ``ValueError``).
        default (`Any`, *optional*): shown in ``--help``; the constructor's own default applies when unset.
        shorthand (`tuple[str, Any]`, *optional*): another flag that sets this option to a fixed value,
            e.g. ``("--batch", None)``.
        required (`bool`, defaults to `False`): the agent cannot run without it.
        protocol (`bool`, defaults to `True`): whether the option can change what an episode holds.  Options
            that only shape how requests are sent (timeouts, retries, a rate cap) say `False`, so that a run
            may be resumed with other values of them.
    """

    name: str
    help: str
    type: Callable[[str], Any] = str
    default: Any = None
    shorthand: Optional[Any] = None
    required: bool = False
    protocol: bool = True

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def positive_number(text: str) -> float:
    """A number above 0 (``ValueError`` otherwise)."""
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise ValueError("must be a positive number, got %s" % text)
    return value


def positive_int(text: str) -> int:
    """A whole number of at least 1 (``ValueError`` otherwise)."""
    value = int(text)
    if value < 1:
        raise ValueError("must be a positive integer, got %d" % value)
    return value


@dataclass
class Turn:
    """One assistant turn: the ``action`` for ``env.step`` and notes on what went wrong producing it."""

    action: Any
    notes: List[str] = field(default_factory=list)


class AgentError(RuntimeError):
    """The agent cannot go on (an endpoint that keeps failing); the runner ends the episode and records why."""


class Agent:
    """The agent signature.

    Attributes:
        name (`str`): the name :func:`make_agent` knows it by.
        privileged (`bool`): whether ``reset`` receives the task row (only the oracle reads it).
    """

    name = "agent"
    privileged = False
    OPTIONS: Tuple[Option, ...] = ()

    def reset(self, observation: Mapping[str, Any], info: Mapping[str, Any], *, rng: random.Random, row: Optional[Mapping[str, Any]] = None) -> None:
        """Start an episode: ``observation`` is ``env.reset()``'s; ``rng`` is the episode's only randomness."""
        raise NotImplementedError

    def act(self, observations: Sequence[Message]) -> Turn:
        """The next turn, given the observation messages of the previous one (empty at the first turn)."""
        raise NotImplementedError

    def usage(self) -> Optional[Dict[str, Any]]:
        """What the episode cost so far (requests, tokens), for agents that call a service; ``None`` otherwise.

        Agents are built once per episode and may run in several threads at once (``eval --concurrency``):
        each instance serves one episode, in one thread, so instance state needs no lock.
        """
        return None


def goal_targets(observation: Mapping[str, Any]) -> Dict[str, int]:
    """``{item: count}`` read from the goal in the first user message (``Craft the following items: 3x a``)."""
    goal = next(m["content"] for m in observation["messages"] if m.get("role") == "user")
    return records.parse_goal(goal)


def call(tool: str, **arguments: Any) -> ToolCall:
    """A tool call in the engine's plain form."""
    return {"name": tool, "arguments": arguments}


def in_turns(calls: List[ToolCall], calls_per_turn: Optional[int]) -> List[List[ToolCall]]:
    """``calls`` cut into turns of at most ``calls_per_turn`` (all in one turn when ``None``)."""
    size = calls_per_turn or max(len(calls), 1)
    return [calls[start : start + size] for start in range(0, len(calls), size)]


def _check_calls_per_turn(calls_per_turn: Optional[int]) -> Optional[int]:
    if calls_per_turn is not None and (type(calls_per_turn) is not int or calls_per_turn < 1):
        raise ValueError("calls_per_turn must be a positive integer or None (no limit), got %r" % (calls_per_turn,))
    return calls_per_turn


# ----------------------------------------------------------------------------------------------- baselines


class ScriptedAgent(Agent):
    """Plays a list of turns computed at reset."""

    def __init__(self) -> None:
        self._turns: List[List[ToolCall]] = []

    def act(self, observations: Sequence[Message]) -> Turn:
        return Turn(self._turns.pop(0) if self._turns else [call("finish", message="Done.")])


CALLS_PER_TURN = Option(
    "calls_per_turn",
    "tool calls per turn (default: %(default)s)",
    positive_int,
    default=1,
    shorthand=("--batch", None),
)


class OracleAgent(ScriptedAgent):
    """The row's gold crafts (the craft tool takes the total made), then ``finish``."""

    name = "oracle"
    privileged = True
    OPTIONS = (CALLS_PER_TURN,)

    def __init__(self, calls_per_turn: Optional[int] = 1) -> None:
        super().__init__()
        self.calls_per_turn = _check_calls_per_turn(calls_per_turn)

    def reset(self, observation, info, *, rng, row=None) -> None:
        if row is None:
            raise ValueError("the oracle needs the task row")
        self._turns = in_turns(records.gold_tool_calls(row), self.calls_per_turn)


class NopAgent(ScriptedAgent):
    """Finishes at once, having crafted nothing."""

    name = "nop"

    def reset(self, observation, info, *, rng, row=None) -> None:
        self._turns = [[call("finish", message="I crafted nothing.")]]


class RandomAgent(Agent):
    """One well-formed call a turn with random content, from what it has seen so far.

    It looks up random known items, crafts a random described recipe at 1-3 times its result count (with
    the recipe's exact ingredients, so a craft succeeds whenever they are held), views the inventory, and
    finishes with probability ``finish_probability`` per turn.
    """

    name = "random"
    OPTIONS = (Option("finish_probability", "random: chance of finishing on each turn (default: %(default)s)", float, default=0.05),)

    def __init__(self, finish_probability: float = 0.05) -> None:
        if not 0.0 <= finish_probability <= 1.0:
            raise ValueError("finish_probability must be within [0, 1], got %r" % (finish_probability,))
        self.finish_probability = finish_probability

    def reset(self, observation, info, *, rng, row=None) -> None:
        self.rng = rng
        self.known = list(goal_targets(observation))
        self.recipes: Dict[str, Dict[str, Any]] = {}
        self._last: Optional[ToolCall] = None

    def act(self, observations: Sequence[Message]) -> Turn:
        if self._last is not None and self._last["name"] == "get_info" and observations:
            for entry in _json_or(observations[0].get("content"), []):
                self._learn(entry)
        rng = self.rng
        draw = rng.random()
        if draw < self.finish_probability:
            chosen = call("finish", message="Done.")
        elif draw < 0.15 or not self.recipes:
            chosen = call("get_info", items=[rng.choice(self.known)])
        elif draw < 0.25:
            chosen = call("view_inventory")
        else:
            item = rng.choice(sorted(self.recipes))
            recipe = self.recipes[item]
            crafts = rng.randint(1, 3)
            chosen = call(
                "craft",
                ingredients={name: count * crafts for name, count in recipe["ingredients"].items()},
                target=[item, recipe["result_count"] * crafts],
            )
        self._last = chosen
        return Turn([chosen])

    def _learn(self, entry: Any) -> None:
        if not isinstance(entry, dict) or not entry.get("recipes"):
            return
        recipe = entry["recipes"][0]
        self.recipes[entry["item"]] = recipe
        for name in recipe["ingredients"]:
            if name not in self.known:
                self.known.append(name)


class PlannerAgent(Agent):
    """A rule-based agent that knows only what the tools print.

    Turn by turn: ``view_inventory`` (with ``get_info`` of the targets in the same turn when batching), then
    ``get_info`` of every ingredient not yet described, one level of the recipe tree per turn, until every
    item is either described or held.  Then it plans: going from the targets down (each item after every item
    that uses it), the shortfall of an item is what the targets and the crafts above need beyond what is held,
    rounded up to the recipe's result count; each item with a shortfall is crafted once with that total,
    ingredients first.  Finally ``finish``.  It never sees the task row.
    """

    name = "planner"
    OPTIONS = (CALLS_PER_TURN,)

    def __init__(self, calls_per_turn: Optional[int] = 1) -> None:
        self.calls_per_turn = _check_calls_per_turn(calls_per_turn)

    def reset(self, observation, info, *, rng, row=None) -> None:
        self.targets = goal_targets(observation)
        self.held: Dict[str, int] = {}
        self.recipes: Dict[str, Optional[Dict[str, Any]]] = {}  # item -> first recipe, or None (base / none)
        self._pending: List[ToolCall] = []
        self._planned: Optional[List[List[ToolCall]]] = None
        self._started = False

    def act(self, observations: Sequence[Message]) -> Turn:
        for sent, message in zip(self._pending, observations):
            self._read(sent, message.get("content", ""))
        if self._planned is None:
            look = self._next_lookups()
            if look:
                self._pending = look
                return Turn(look)
            finish = call("finish", message=records.finish_message(self.targets))
            self._planned = in_turns(self.plan() + [finish], self.calls_per_turn)
        self._pending = []
        return Turn(self._planned.pop(0) if self._planned else [call("finish", message=records.finish_message(self.targets))])

    def _next_lookups(self) -> List[ToolCall]:
        if not self._started:
            self._started = True
            first = [call("view_inventory")]
            if self.calls_per_turn != 1:
                first.append(call("get_info", items=list(self.targets)))
            return first
        unknown = [item for item in self._tree_items() if item not in self.recipes]
        return [call("get_info", items=unknown)] if unknown else []

    def _tree_items(self) -> List[str]:
        """The targets and every ingredient below them in the recipes described so far, in discovery order."""
        order = list(self.targets)
        seen = set(order)
        for item in order:  # grows while it is walked: a breadth-first walk
            recipe = self.recipes.get(item)
            for name in recipe["ingredients"] if recipe else ():
                if name not in seen:
                    seen.add(name)
                    order.append(name)
        return order

    def _read(self, sent: ToolCall, text: str) -> None:
        if sent["name"] == "view_inventory":
            inventory = _json_or(text, {})
            if isinstance(inventory, dict):
                self.held = {k: v for k, v in inventory.items() if isinstance(v, int)}
        elif sent["name"] == "get_info":
            for entry in _json_or(text, []):
                if isinstance(entry, dict) and isinstance(entry.get("item"), str):
                    recipes = entry.get("recipes") or []
                    self.recipes[entry["item"]] = recipes[0] if recipes else None

    def plan(self) -> List[ToolCall]:
        """The crafts, ingredients first, that bring every target to its count from what is held."""
        order = self._topological_order()  # every item after every item it is made from
        demand = {item: self.held.get(item, 0) + count for item, count in self.targets.items()}
        crafts: List[ToolCall] = []
        for item in reversed(order):  # users before ingredients: an item's demand is complete when reached
            shortfall = demand.get(item, 0) - self.held.get(item, 0)
            recipe = self.recipes.get(item)
            if shortfall <= 0 or recipe is None:
                continue
            result_count = recipe["result_count"]
            runs = -(-shortfall // result_count)
            ingredients = {name: count * runs for name, count in recipe["ingredients"].items()}
            for name, amount in ingredients.items():
                demand[name] = demand.get(name, 0) + amount
            crafts.append(call("craft", ingredients=ingredients, target=[item, result_count * runs]))
        crafts.reverse()
        return crafts

    def _topological_order(self) -> List[str]:
        """Depth-first post-order from the targets: ingredients come before what they make."""
        order: List[str] = []
        state: Dict[str, int] = {}  # 1 on the path, 2 done

        def visit(item: str) -> None:
            if state.get(item) is not None:
                return  # done, or a cycle (not in this world): leave it
            state[item] = 1
            recipe = self.recipes.get(item)
            for name in recipe["ingredients"] if recipe else ():
                visit(name)
            state[item] = 2
            order.append(item)

        for target in self.targets:
            visit(target)
        return order


def _json_or(text: Any, default: Any) -> Any:
    if not isinstance(text, str):
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


# ---------------------------------------------------------------------------------------------- the model


DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_RETRIES = 3
# The longest wait a Retry-After header may ask for; a longer one is cut to this.
MAX_RETRY_AFTER_S = 300.0
# Failures worth another attempt: the server or the network, not the request.
_RETRY_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))
# What a kept-alive connection that the server closed in the meantime looks like on the next request.
_STALE_CONNECTION = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class _Gauge:
    """A counter many threads move (requests in flight, for the progress bar)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def add(self, delta: int) -> None:
        with self._lock:
            self.value += delta


REQUESTS_IN_FLIGHT = _Gauge()


def requests_in_flight() -> int:
    """How many chat requests of this process are waiting for their reply right now."""
    return REQUESTS_IN_FLIGHT.value


class RateLimiter:
    """At most ``rate`` acquisitions a second, evenly spaced, shared by every thread that holds it.

    A token bucket of one token: each caller is given the next free slot (``1 / rate`` after the previous
    one) and sleeps until it, outside the lock, so waiting callers never block each other's bookkeeping.

    Args:
        rate (`float`): acquisitions per second, above 0.
        clock (`Callable[[], float]`, defaults to `time.monotonic`): the time in seconds.
        sleep (`Callable[[float], None]`, defaults to `time.sleep`): waits.
    """

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        if not rate > 0:
            raise ValueError("max_rps must be above 0, got %r" % (rate,))
        self.interval = 1.0 / rate
        self.clock = clock
        self.sleep = sleep
        self._lock = threading.Lock()
        self._next = -float("inf")

    def acquire(self) -> float:
        """Wait for this caller's slot; returns the seconds waited."""
        with self._lock:
            now = self.clock()
            slot = max(now, self._next)
            self._next = slot + self.interval
        wait = slot - now
        if wait > 0:
            self.sleep(wait)
        return wait


_LIMITERS: Dict[Tuple[str, float], RateLimiter] = {}
_LIMITERS_LOCK = threading.Lock()


def shared_limiter(key: str, rate: float) -> RateLimiter:
    """The one :class:`RateLimiter` of this process for ``(key, rate)``: every episode's agent gets the same."""
    with _LIMITERS_LOCK:
        limiter = _LIMITERS.get((key, rate))
        if limiter is None:
            limiter = _LIMITERS[(key, rate)] = RateLimiter(rate)
        return limiter


class _ThreadConnections(threading.local):
    """Each thread's kept-alive connections, one per (scheme, host, port): episodes in a thread reuse them."""

    def __init__(self) -> None:
        self.open: Dict[Tuple[str, str, int], http.client.HTTPConnection] = {}


_CONNECTIONS = _ThreadConnections()


def retry_after_seconds(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """A ``Retry-After`` header in seconds: a whole number of seconds or an HTTP date; ``None`` if unreadable.

    >>> retry_after_seconds("7")
    7.0
    >>> retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412475.0)
    5.0
    """
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class _Failure(Exception):
    """One failed attempt: ``note`` says why, ``retry`` whether another attempt may help, ``wait`` a server's ask."""

    def __init__(self, note: str, retry: bool = True, wait: Optional[float] = None) -> None:
        super().__init__(note)
        self.note, self.retry, self.wait = note, retry, wait


class OpenAIAgent(Agent):
    """A tool-calling chat model behind an OpenAI-compatible ``POST {base_url}/chat/completions``.

    The conversation starts with the environment's system prompt and goal and sends the four tool schemas;
    each reply's assistant message is the action, and the environment's answers are appended as ``tool``
    messages.  Transient failures (HTTP 408/409/429/5xx, timeouts, dropped connections, a body that is not a
    chat completion) are retried up to ``retries`` times with exponential backoff, waiting longer when the
    server's ``Retry-After`` header (seconds or an HTTP date, at most 300 s) asks for it; each is noted in
    the turn.  When the attempts run out, or on another HTTP error (a bad key or model), :class:`AgentError`
    ends the episode.  Malformed replies (arguments that are not JSON, unknown tools, plain text) are the
    environment's to answer: they become error observations and use a step.

    Requests go over persistent (keep-alive) connections, one per thread and server, so episodes run one
    after another in a thread reuse them; a kept connection the server closed meanwhile is reopened at once
    without counting as an attempt.  ``max_rps`` caps the requests per second of every episode of the process
    together.  :meth:`usage` counts the requests sent and the tokens the server reports in ``usage``.

    Args:
        model (`str`): the model name the endpoint serves.
        base_url (`str`, defaults to ``"https://api.openai.com/v1"``): the API root.
        api_key_env (`str`, defaults to ``"OPENAI_API_KEY"``): the environment variable holding the key;
            when unset, no ``Authorization`` header is sent (local servers).
        temperature (`float`, *optional*): sampling temperature; the server's default when ``None``.
        max_tokens (`int`, *optional*): the reply length cap.
        timeout (`float`, defaults to 120): seconds to wait for the server (connecting, and each read).
        retries (`int`, defaults to 3): further attempts after a transient failure.
        max_rps (`float`, *optional*): requests per second, at most, over all episodes of the process.
        backoff (`float`, defaults to 1.0): seconds before the first retry, doubled each time.
    """

    name = "openai"
    OPTIONS = (
        Option("model", "openai: the model name the endpoint serves", required=True),
        Option("base_url", "openai: OpenAI-compatible API root (default: %(default)s)", default=DEFAULT_BASE_URL),
        Option("api_key_env", "openai: environment variable holding the API key (default: %(default)s)", default=DEFAULT_API_KEY_ENV),
        Option("temperature", "openai: sampling temperature (default: the server's)", float),
        Option("max_tokens", "openai: reply length cap", positive_int),
        Option("timeout", "openai: seconds to wait for the server, per request (default: %(default)s)", positive_number, default=DEFAULT_TIMEOUT_S, protocol=False),
        Option("retries", "openai: retries after a transient failure (default: %(default)s)", int, default=DEFAULT_RETRIES, protocol=False),
        Option("max_rps", "openai: requests per second at most, over all episodes in flight (default: no cap)", positive_number, protocol=False),
    )

    def __init__(
        self,
        model: str,
        base_url: str = DEFAULT_BASE_URL,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        temperature: Optional[float] = None,
        max_tokens: Optional[int] = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        max_rps: Optional[float] = None,
        backoff: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not model:
            raise ValueError("the openai agent needs a model name (--model)")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://, got %r" % (base_url,))
        if retries < 0 or timeout <= 0:
            raise ValueError("retries must be >= 0 and timeout > 0")
        parts = urllib.parse.urlsplit(base_url.rstrip("/") + "/chat/completions")
        if not parts.hostname:
            raise ValueError("base_url has no host: %r" % (base_url,))
        self.model = model
        self.url = parts.geturl()
        self._server = (parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
        self._path = parts.path + ("?" + parts.query if parts.query else "")
        self._host_header = parts.netloc.rpartition("@")[2]
        self.api_key = os.environ.get(api_key_env) or None
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.retries = retries
        self.limiter = shared_limiter(self.url, max_rps) if max_rps is not None else None
        self.backoff = backoff
        self.sleep = sleep
        self._usage: Dict[str, Any] = {"requests": 0, "prompt_tokens": None, "completion_tokens": None}

    def reset(self, observation, info, *, rng, row=None) -> None:
        self.messages: List[Message] = [dict(message) for message in observation["messages"]]
        self.tools = observation["tools"]
        self.seed = rng.randrange(2**31)
        self._usage = {"requests": 0, "prompt_tokens": None, "completion_tokens": None}

    def act(self, observations: Sequence[Message]) -> Turn:
        self.messages.extend(_conversation_message(message) for message in observations)
        notes: List[str] = []
        reply = self._complete(notes)
        message: Message = {"role": "assistant", "content": reply.get("content")}
        if reply.get("tool_calls"):
            message["tool_calls"] = reply["tool_calls"]
        elif message["content"] is None:
            message["content"] = ""  # an assistant message without tool calls needs text
        self.messages.append(message)
        return Turn(message, notes)

    def usage(self) -> Dict[str, Any]:
        """``requests`` sent this episode (retries included) and the ``prompt_tokens`` and ``completion_tokens``
        the replies reported (``None`` when no reply carried ``usage``)."""
        return dict(self._usage)

    def request_body(self) -> Dict[str, Any]:
        body: Dict[str, Any] = {"model": self.model, "messages": self.messages, "tools": self.tools, "seed": self.seed}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return body

    def _complete(self, notes: List[str]) -> Dict[str, Any]:
        """The reply's assistant message, retrying transient failures (each noted)."""
        data = json.dumps(self.request_body()).encode("utf-8")
        headers = {"Content-Type": "application/json", "Host": self._host_header}
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        wait: Optional[float] = None
        for attempt in range(self.retries + 1):
            if attempt:
                self.sleep(max(self.backoff * 2 ** (attempt - 1), min(wait or 0.0, MAX_RETRY_AFTER_S)))
            try:
                body = self._post(data, headers)
            except _Failure as failure:
                if not failure.retry:
                    raise AgentError(failure.note)
                notes.append("attempt %d: %s" % (attempt + 1, failure.note))
                wait = failure.wait
                continue
            message = _reply_message(body)
            if isinstance(message, str):
                notes.append("attempt %d: %s" % (attempt + 1, message))
                wait = None
                continue
            self._count_tokens(body)
            return message
        raise AgentError("no usable reply after %d attempts: %s" % (self.retries + 1, notes[-1] if notes else "?"))

    def _post(self, data: bytes, headers: Mapping[str, str]) -> bytes:
        """One attempt: the body of a 2xx reply, or :class:`_Failure`."""
        if self.limiter is not None:
            self.limiter.acquire()
        self._usage["requests"] += 1
        REQUESTS_IN_FLIGHT.add(1)
        try:
            for fresh in (False, True):
                connection, reused = self._connection(fresh)
                try:
                    connection.request("POST", self._path, body=data, headers=headers)
                    response = connection.getresponse()
                    body = response.read()
                except _STALE_CONNECTION as error:
                    connection.close()
                    if reused and not fresh:
                        continue  # the server closed a kept connection while it was idle: reopen, same attempt
                    raise _Failure("connection failed: %s" % (error or type(error).__name__))
                except (socket.timeout, TimeoutError):
                    connection.close()
                    raise _Failure("no reply within %gs" % self.timeout)
                except (ConnectionRefusedError, socket.gaierror) as error:
                    connection.close()
                    raise _Failure("cannot reach %s: %s" % (self.url, error))
                except (http.client.HTTPException, OSError) as error:
                    connection.close()
                    raise _Failure("connection failed: %s" % (error or type(error).__name__))
                if response.will_close:
                    connection.close()
                break
        finally:
            REQUESTS_IN_FLIGHT.add(-1)
        if 200 <= response.status < 300:
            return body
        detail = _short(body)
        if response.status not in _RETRY_STATUS:
            raise _Failure("HTTP %d from %s: %s" % (response.status, self.url, detail), retry=False)
        return_wait = retry_after_seconds(response.getheader("Retry-After"))
        raise _Failure("HTTP %d: %s" % (response.status, detail), wait=return_wait)

    def _connection(self, fresh: bool) -> Tuple[http.client.HTTPConnection, bool]:
        """This thread's connection to the server (a new one when ``fresh``), and whether it was used before."""
        connection = _CONNECTIONS.open.get(self._server)
        if connection is not None and not fresh:
            connection.timeout = self.timeout
            if connection.sock is not None:
                connection.sock.settimeout(self.timeout)
                return connection, True
            return connection, False
        if connection is not None:
            connection.close()
        scheme, host, port = self._server
        kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        connection = _CONNECTIONS.open[self._server] = kind(host, port, timeout=self.timeout)
        return connection, False

    def _count_tokens(self, body: bytes) -> None:
        try:
            usage = json.loads(body.decode("utf-8")).get("usage")
        except (ValueError, UnicodeDecodeError, AttributeError):
            return
        if not isinstance(usage, dict):
            return
        for key in ("prompt_tokens", "completion_tokens"):
            value = usage.get(key)
            if type(value) is int and value >= 0:
                self._usage[key] = (self._usage[key] or 0) + value


def _reply_message(body: bytes) -> Any:
    """The assistant message of a chat-completion body, or a sentence saying why there is none."""
    try:
        document = json.loads(body.decode("utf-8"))
        message = document["choices"][0]["message"]
    except (ValueError, UnicodeDecodeError):
        return "the reply is not JSON: %s" % _short(body)
    except (KeyError, IndexError, TypeError):
        return "the reply has no choices[0].message: %s" % _short(body)
    if not isinstance(message, dict):
        return "choices[0].message is not an object"
    return message


def _conversation_message(observation: Message) -> Message:
    """An environment message as the chat API takes it (a tool answer without a call id becomes user text)."""
    if observation.get("role") == "tool":
        if "tool_call_id" in observation:
            return {"role": "tool", "tool_call_id": observation["tool_call_id"], "content": observation["content"]}
        return {"role": "user", "content": "%s: %s" % (observation.get("name") or "tool", observation["content"])}
    return {"role": observation.get("role", "user"), "content": observation.get("content", "")}


def _short(data: Any, limit: int = 200) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


# ------------------------------------------------------------------------------------------ the recursive one


DEFAULT_DELEGATE_DEPTH = 3  # the same as tcsynth.recursive.DEFAULT_DELEGATE_DEPTH (a test holds them together)
# A child's turn budget when the parent's own is unlimited (it must be a whole number in the call).
DEFAULT_CHILD_STEPS = 75
MAX_DELEGATION_ROUNDS = 3
DEFAULT_MAX_DELEGATION_DEPTH = 2  # the same as tcsynth.recursive.DEFAULT_MAX_DEPTH


class RecursivePlannerAgent(PlannerAgent):
    """The planner that hands deep subtrees to subagents (:mod:`tcsynth.recursive`), recursively.

    It looks recipes up like ``planner`` but stops at every ingredient at least ``delegate_depth`` deep:
    those it launches a subagent for (targets: what its own crafts need beyond what it holds; budget: its
    own turn budget), deepest first, all in one turn when batching, with ``view_inventory`` last, so that it
    plans its own crafts (the top of its tree) from what the subagents left.  When a subagent used up
    something it had counted on, it launches again for what is still short (at most
    ``MAX_DELEGATION_ROUNDS`` rounds).  Then it crafts and finishes.  Each subagent
    is the same policy; at the depth cap, where ``launch_subagent`` is not offered, it plays as ``planner``.
    The runner reads ``recursive``, ``max_delegation_depth``, :meth:`spawn` (a child's policy) and
    :meth:`baseline` (the agent its root turns are compared with).
    """

    name = "recursive-planner"
    recursive = True
    OPTIONS = (
        CALLS_PER_TURN,
        Option("delegate_depth", "recursive-planner: delegate ingredients at least this deep (default: %(default)s)", positive_int, default=DEFAULT_DELEGATE_DEPTH),
        Option("max_delegation_depth", "recursive agents: how deep subagents may nest; 0 for none (default: %(default)s)", int, default=DEFAULT_MAX_DELEGATION_DEPTH),
    )

    def __init__(self, calls_per_turn: Optional[int] = 1, delegate_depth: int = DEFAULT_DELEGATE_DEPTH, max_delegation_depth: int = DEFAULT_MAX_DELEGATION_DEPTH) -> None:
        super().__init__(calls_per_turn)
        if type(delegate_depth) is not int or delegate_depth < 1:
            raise ValueError("delegate_depth must be a positive integer, got %r" % (delegate_depth,))
        if type(max_delegation_depth) is not int or max_delegation_depth < 0:
            raise ValueError("max_delegation_depth must be a non-negative integer, got %r" % (max_delegation_depth,))
        self.delegate_depth = delegate_depth
        self.max_delegation_depth = max_delegation_depth

    def spawn(self) -> "RecursivePlannerAgent":
        return RecursivePlannerAgent(self.calls_per_turn, self.delegate_depth, self.max_delegation_depth)

    def baseline(self) -> PlannerAgent:
        return PlannerAgent(self.calls_per_turn)

    def reset(self, observation, info, *, rng, row=None) -> None:
        from . import recursive

        goal = next(m["content"] for m in observation["messages"] if m.get("role") == "user")
        self.targets = records.parse_goal(recursive.prompt_goal(goal))
        self.held = {}
        self.recipes = {}
        self.depths: Dict[str, int] = {}
        self._pending = []
        self._queue: List[List[ToolCall]] = []
        self._planned = None
        self._started = False
        self._delegated = 0  # rounds of launches so far
        tools = {tool.get("function", {}).get("name") for tool in observation.get("tools", ())}
        self.can_delegate = recursive.LAUNCH_TOOL in tools
        budget = info.get("max_steps")
        self.child_steps = budget if type(budget) is int else DEFAULT_CHILD_STEPS

    def _threshold(self) -> Optional[int]:
        return self.delegate_depth if self.can_delegate else None

    def _tree_items(self) -> List[str]:
        from . import recursive

        return recursive.frontier_items(list(self.targets), self.recipes, self.depths, self._threshold())

    def _read(self, sent: ToolCall, text: str) -> None:
        super()._read(sent, text)
        if sent["name"] == "get_info":
            for entry in _json_or(text, []):
                if isinstance(entry, dict) and isinstance(entry.get("item"), str) and isinstance(entry.get("crafting_depth"), int):
                    self.depths[entry["item"]] = entry["crafting_depth"]

    def act(self, observations: Sequence[Message]) -> Turn:
        from . import recursive

        for sent, message in zip(self._pending, observations):
            self._read(sent, message.get("content", ""))
        self._pending = []
        if self._planned is None and not self._queue:
            look = [] if self._delegated else self._next_lookups()
            if look:
                self._pending = look
                return Turn(look)
            delegations, crafts = recursive.plan_part(self.targets, self.recipes, self.depths, self.held, self._threshold())
            # Another round when a subagent used up what this agent had counted on (then it asks again).
            if delegations and self._delegated < MAX_DELEGATION_ROUNDS:
                self._delegated += 1
                launches = [call(recursive.LAUNCH_TOOL, targets={item: count}, num_steps=self.child_steps) for item, count in delegations]
                self._queue = in_turns(launches + [call("view_inventory")], self.calls_per_turn)
            else:
                finish = call("finish", message=records.finish_message(self.targets))
                self._planned = in_turns([call("craft", ingredients=ingredients, target=[item, total]) for item, total, ingredients in crafts] + [finish], self.calls_per_turn)
        if self._queue:
            self._pending = self._queue.pop(0)
            return Turn(self._pending)
        return Turn(self._planned.pop(0) if self._planned else [call("finish", message=records.finish_message(self.targets))])


# ------------------------------------------------------------------------------------------------ registry

AGENTS: Dict[str, Callable[..., Agent]] = {
    "oracle": OracleAgent,
    "nop": NopAgent,
    "random": RandomAgent,
    "planner": PlannerAgent,
    "openai": OpenAIAgent,
    "recursive-planner": RecursivePlannerAgent,
}


def make_agent(name: str, **options: Any) -> Agent:
    """The agent called ``name`` built with ``options`` (``ValueError`` naming the agents otherwise)."""
    if name not in AGENTS:
        raise ValueError("unknown agent %r; the agents are %s" % (name, ", ".join(AGENTS)))
    try:
        return AGENTS[name](**options)
    except TypeError as error:
        raise ValueError("agent %s: %s" % (name, error))
