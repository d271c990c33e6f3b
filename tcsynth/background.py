"""A second process for the other core: a forked child runs one function while this process goes on.

The build and the Harbor export each split their work in two (checking the records, making files); on two
cores a forked child halves the wall time.  It shares the parent's records copy-on-write, so only its result
crosses the pipe.  Where ``fork`` does not exist, or there is one core, the function simply runs at once.
Fork before starting threads.
"""

from __future__ import annotations

import os
import pickle
from typing import Any, Callable, Iterator, List, Sequence

from .errors import UserError


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the system has one, as under ``taskset``)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class BackgroundError(UserError):
    """The second process died without an answer (killed, out of memory)."""


def _child(function: Callable[..., Any], args: Any, connection: Any) -> None:
    try:
        try:
            answer = (True, function(*args))
        except BaseException as error:  # the parent re-raises it
            answer = (False, error)
        try:
            connection.send(answer)
        except (pickle.PicklingError, TypeError, AttributeError):  # an exception that does not pickle
            connection.send((False, BackgroundError("%s: %s" % (type(answer[1]).__name__, answer[1]))))
    finally:
        connection.close()


def start(function: Callable[..., Any], *args: Any, what: str = "the second process") -> Callable[[], Any]:
    """Start ``function(*args)``; return ``wait()``, which returns its result or raises its exception.

    ``what`` names the work in the message of a child that dies without answering.  The first ``wait()``
    blocks; later calls give the same answer.
    """
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods() or cores() < 2:
        try:
            answer = (True, function(*args))
        except Exception as error:
            answer = (False, error)
        return lambda: _give(answer)
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(function, args, sender), daemon=True)
    process.start()
    sender.close()
    answers: List[Any] = []

    def wait() -> Any:
        if not answers:
            try:
                answers.append(receiver.recv())
            except EOFError:
                process.join()
                answers.append((False, BackgroundError("%s died (exit code %s)" % (what, process.exitcode))))
            finally:
                receiver.close()
                process.join()
        return _give(answers[0])

    return wait


def _give(answer: Any) -> Any:
    ok, value = answer
    if not ok:
        raise value
    return value


def imap(function: Callable[[Any], Any], items: Sequence[Any], processes: int = 2) -> Iterator[Any]:
    """``function(item)`` for each item, in order, made by up to ``processes`` forked workers as they free up.

    ``function`` must be a module-level function; it reads what the items do not carry from state set
    before the call (the fork copies it).  Without ``fork``, with one core or one process, it runs here.
    An exception in a worker is raised here, and a worker that dies raises :class:`BackgroundError`.  Fork
    before starting threads.
    """
    import multiprocessing

    processes = min(processes, cores(), len(items))
    if processes < 2 or "fork" not in multiprocessing.get_all_start_methods():
        yield from map(function, items)
        return
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork")) as pool:
        try:
            yield from pool.map(function, items)
        except BrokenProcessPool:
            raise BackgroundError("a worker process died (killed, or out of memory)")
