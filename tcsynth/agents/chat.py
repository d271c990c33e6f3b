"""A tool-calling chat model behind any OpenAI-compatible ``/chat/completions`` endpoint."""

from __future__ import annotations

import email.utils
import http.client
import json
import os
import socket
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .base import Agent, AgentError, Message, Option, Turn, positive_int, positive_number

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
