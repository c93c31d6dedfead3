"""Every model call planexec makes: where it runs, within its time limits, whole.

:class:`planexec.llm.scrubbed.ScrubbedChatModel` makes each real call through
:func:`request_reply` (:func:`request_reply_blocking` runs it on the background loop for a sync
caller). This module is the one place that enforces what planexec promises about providers:

* **Deadlines.** A call has three limits (``Context.<role>_timeouts``): ``connect`` (given to
  the client, for clients that take one), ``idle`` (the longest wait for the next part of a
  streamed reply, keep-alive comments do not count; also the client's read timeout) and
  ``total`` (the whole call, its retries and waits included). A call past one of them is
  cancelled (its connection closed) and raises :class:`ModelTimeoutError`.
* **No client is bound to a loop that can close.** A provider integration's call runs on
  planexec's background loop (:mod:`planexec.concurrency.background`), which lives as long as the
  process, whatever called (``invoke`` or ``ainvoke``, one run or many, threads, the server),
  so a client's connection pool is only ever used from that loop. Any other model runs on a
  daemon worker, as a tool does (:func:`mode_of`): code of its own that blocks holds only its
  own call. The caller waits for the call's events without blocking its own loop.
* **Back-pressure.** The one layer that asks a model request again. A request that failed
  before any of its reply came, with an error that may pass (:func:`planexec.errors.is_transient`:
  rate limits, 5xx, a dropped connection, a custom model's ``ConnectionError``), is asked again:
  at most :data:`MAX_TRIES` requests a call, after the provider's ``Retry-After`` (or a short
  backoff), never past the deadline. An error that cannot pass (a spent quota, a prompt past the
  context length, a refused key) is not asked again. Either way the error that leaves is not
  transient (nobody asks the same request again): a :class:`ProviderError` naming the
  provider's status, code and message, and the endpoint the request went to
  (:mod:`planexec.llm.endpoint`: scheme, host, port and path, keys masked; a URL quoted in the
  message is shown the same way), or for another error that may pass a :class:`ModelCallError`
  naming it. A reply that broke off after part of it was shown to a watcher is not asked again
  here: it raises an error that is transient (:func:`planexec.errors.broke_off`), and the
  watcher's caller may start a new conversation.
* **Whole text, whole replies.** Streamed chunks are mended before anyone sees them: a
  character split across two chunks (a surrogate pair's halves) is joined, a tool's name that a
  serving stack repeats in every delta is kept once. A reply that did not end normally
  (:func:`unfinished`: a finish reason other than a normal end, no finish reason where the
  provider always sends one, a refusal) raises :class:`IncompleteReplyError`. A streamed reply
  that came back empty is asked once more, whole (LangChain's clients drop a streamed refusal:
  the whole reply carries its words); a refusal is never asked again after that, here or by
  the plan's repairs (:func:`planexec.drafting.refused`).

Hand-rolled because no library does these for any LangChain chat model: LangChain's clients
pass no deadline by default, retry without ``Retry-After`` where they retry at all, and bind
their async connection pools to whichever loop used them first.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable, Generator
from contextvars import Context as VarContext
from contextvars import copy_context
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessageChunk,
    BaseMessage,
    BaseMessageChunk,
    message_chunk_to_message,
)
from langchain_core.runnables import Runnable

from planexec.concurrency import background, workers
from planexec.concurrency.offloop import run_in_thread
from planexec.errors import (
    IncompleteReplyError,
    ModelCallError,
    ModelTimeoutError,
    ProviderError,
    is_connection_failure,
    is_transient,
)
from planexec.llm.endpoint import endpoint_of, shown_url, urls_shown
from planexec.llm.params import shown_params
from planexec.llm.scripted import ScriptedChatModel
from planexec.recording import recording_in_use
from planexec.recording.models import model_call_key
from planexec.redaction.secrets import secret_values

MAX_TRIES = 3
"""Most requests one model call makes for errors that may pass (within its deadline).

The only retries of a model request: nothing above this layer asks the same request again."""

FIRST_BACKOFF = 0.5
"""Seconds before the second try when the provider names no wait; doubled after each try."""

MAX_BACKOFF = 8.0
"""Longest wait, in seconds, between tries when the provider names none (``Retry-After``)."""


@dataclass(frozen=True)
class Limits:
    """A model call's time limits in seconds (see the module's docstring)."""

    connect: float = 10.0
    idle: float = 90.0
    total: float = 300.0


@dataclass(frozen=True)
class Request:
    """One model call: what to send, to whom, and who watches its reply stream."""

    inner: Runnable[LanguageModelInput, BaseMessage]
    base: object
    messages: list[BaseMessage]
    kwargs: dict[str, Any]
    limits: Limits
    who: str = "model"
    """The role's name in messages, e.g. "planner" (for "the planner model ...")."""
    watch: Callable[[BaseMessage], None] | None = None
    """Shown each chunk as it arrives; the reply is then streamed (None: asked whole)."""


# --- where a request runs ---------------------------------------------------------------------


Event = tuple[str, Any]
"""What a running request reports: ("chunk", c), ("whole", m), ("end", None), or
("error", exc)."""


Mode = str
"""Where a request runs: "loop" (the background loop: provider integrations, whose clients are
async and never block it), "worker-async" (a custom model's own async code, on a daemon
worker's loop), "worker-sync" (a model's sync API, on a daemon worker's thread)."""


def mode_of(request: Request) -> Mode:
    """Return where a request runs: a custom model never shares a loop with anyone.

    A provider integration (:data:`PROVIDER_PACKAGES`) runs on the background loop. Any other
    model (scripted, a test double, your own) runs on a daemon worker, as a tool does: code
    that blocks holds only itself. Its async API is used when it has async code of its own,
    else its sync API (on the worker's thread).
    """
    if _provider_integration(request.base):
        return "loop"
    if _has_own_async(request.base, request.watch is not None):
        return "worker-async"
    return "worker-sync"


class _Producer:
    """One request, running where :func:`mode_of` says, reporting its events to ``deliver``."""

    def __init__(
        self,
        request: Request,
        streamed: bool,
        deliver: Callable[[Event], None],
        context: VarContext,
        mode: Mode,
    ) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[None] | None = None
        self.stopped = threading.Event()
        self.lock = threading.Lock()
        if mode == "loop":
            self.loop = background.loop()
            self.loop.call_soon_threadsafe(self._start, request, streamed, deliver, context)
            return

        def job(worker: workers.Worker) -> None:
            if mode == "worker-async":
                try:
                    worker.run_coroutine(self._on_worker(request, streamed, deliver), context)
                except BaseException as exc:  # an exit that left the runner (LangChain gathers)
                    deliver(("error", _as_error(exc)))  # the caller keeps the first outcome
            else:
                context.run(_produce_sync, request, streamed, deliver, self.stopped)

        workers.lease().submit(job)

    def _start(
        self,
        request: Request,
        streamed: bool,
        deliver: Callable[[Event], None],
        context: VarContext,
    ) -> None:
        assert self.loop is not None
        self.task = self.loop.create_task(_produce(request, streamed, deliver), context=context)

    async def _on_worker(
        self, request: Request, streamed: bool, deliver: Callable[[Event], None]
    ) -> None:
        loop = asyncio.get_running_loop()
        with self.lock:
            self.loop, self.task = loop, asyncio.current_task()
            if self.stopped.is_set():
                return
        if not getattr(loop, "_planexec_daemon_executor", False):  # the model's own executor
            loop.set_default_executor(workers.DaemonThreads())  # never holds the process at exit
            loop._planexec_daemon_executor = True  # type: ignore[attr-defined]
        await _produce(request, streamed, deliver)

    def cancel(self) -> None:
        """Cancel the request (closing its connection); harmless once it has ended.

        A sync call on a worker cannot be stopped: it stops at its next chunk, and what it
        sends meanwhile is dropped (the caller has gone).
        """
        with self.lock:
            self.stopped.set()
            loop = self.loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: the call has ended
                loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()


async def _produce(request: Request, streamed: bool, deliver: Callable[[Event], None]) -> None:
    config: Any = {"callbacks": []}
    try:
        if streamed:
            mender = _Mender()
            async for chunk in request.inner.astream(request.messages, config, **request.kwargs):
                deliver(("chunk", mender.mend(chunk)))
            last = mender.rest()
            if last is not None:
                deliver(("chunk", last))
            deliver(("end", None))
        else:
            reply = await request.inner.ainvoke(request.messages, config, **request.kwargs)
            deliver(("whole", reply))
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # cancelled by its caller, who has gone
        deliver(("error", RuntimeError(f"the model's call raised {type(exc).__name__} itself")))
    except BaseException as exc:  # the caller's to see (an exit, as the model's own error)
        deliver(("error", _as_error(exc)))


def _produce_sync(
    request: Request, streamed: bool, deliver: Callable[[Event], None], stopped: threading.Event
) -> None:
    """:func:`_produce` through the model's sync API (on a worker thread)."""
    config: Any = {"callbacks": []}
    try:
        if streamed:
            mender = _Mender()
            for chunk in request.inner.stream(request.messages, config, **request.kwargs):
                if stopped.is_set():
                    return  # the caller has gone
                deliver(("chunk", mender.mend(chunk)))
            last = mender.rest()
            if last is not None:
                deliver(("chunk", last))
            deliver(("end", None))
        else:
            deliver(("whole", request.inner.invoke(request.messages, config, **request.kwargs)))
    except BaseException as exc:  # the caller's to see (an exit, as the model's own error)
        deliver(("error", _as_error(exc)))


def _as_error(exc: BaseException) -> BaseException:
    """Return what a model's call raised, an exit (``SystemExit``...) as the model's error.

    An exit raised by a model's code is not the caller's process exiting (a real Ctrl-C reaches
    the main thread, not the model's worker): it fails the call as any error of the model does,
    on sync and async runs alike, instead of unwinding LangChain's calls halfway.
    """
    if isinstance(exc, Exception):
        return exc
    return ModelCallError(f"the model's call raised {type(exc).__name__}", transient=False)


def _provider_integration(base: object) -> bool:
    return any(c.__module__.startswith(PROVIDER_PACKAGES) for c in type(base).__mro__)


def _has_own_async(base: object, streamed: bool) -> bool:
    """Say whether a model has async code of its own for this call.

    Without it LangChain runs the model's sync code in an executor; planexec calls the sync API
    on the worker instead. A streamed call uses ``_astream`` (or ``_agenerate``), a whole one
    ``_agenerate`` only.
    """
    if not isinstance(base, BaseChatModel):
        return True  # a runnable: its async API is all it says it has
    kind = type(base)
    own_generate = kind._agenerate is not BaseChatModel._agenerate
    return own_generate or (streamed and kind._astream is not BaseChatModel._astream)


# --- what the caller does: a conversation without I/O, and its sync and async drivers ----------


@dataclass(frozen=True)
class _Start:
    streamed: bool


@dataclass(frozen=True)
class _Wait:
    seconds: float


@dataclass(frozen=True)
class _Pause:
    seconds: float


_Op = _Start | _Wait | _Pause
_Conduct = Generator[_Op, "Event | None", BaseMessage]


def request_reply_blocking(request: Request) -> BaseMessage:
    """Make a model call for a sync caller: :func:`request_reply` on the background loop."""
    return background.run_blocking(lambda: request_reply(request))


async def request_reply(request: Request) -> BaseMessage:
    """Make a model call for an async caller (its loop stays free); return the reply.

    With a recording in use that keeps models (:mod:`planexec.recording`, set by
    ``build_graph``): a replay serves the reply recorded for this very call, if there is one,
    without calling the model; a recording keeps each reply. The messages come scrubbed
    (:class:`planexec.llm.scrubbed.ScrubbedChatModel`); the recording scrubs what it writes.
    """
    recording = recording_in_use()
    if recording is None or not recording.models:
        return await _request_reply(request)
    key, identity = model_call_key(
        request.who,
        model_identity(request.base, request.inner),
        request.inner,
        request.messages,
        request.kwargs,
    )
    if recording.replaying:
        served: BaseMessage | None = await run_in_thread(
            partial(recording.model_reply, request.who, key)
        )
        if served is not None:
            if request.watch is not None:
                request.watch(served)
            return served
    reply = await _request_reply(request)
    if recording.recording:
        keep = partial(
            recording.keep_model_reply,
            request.who,
            key,
            reply,
            model=identity,
            messages=request.messages,
            secrets=secret_values(),
        )
        await run_in_thread(keep)
    return reply


ENDPOINT_SETTINGS = ("openai_api_base", "base_url", "anthropic_api_url", "api_base", "endpoint")
"""A model's settings that name the server it calls (the first set one is its endpoint)."""


def model_identity(base: object, inner: object) -> dict[str, Any]:
    """Return what a recording knows a model by: a change of any of it misses the recording.

    Its class; every setting it calls with (its invocation parameters: model name,
    temperature, ``top_p``, seed, reasoning effort, ``extra_body``...) as a trace shows them,
    credentials redacted (:func:`planexec.llm.params.shown_params`); the endpoint it calls
    (:func:`planexec.llm.endpoint.shown_url`); for a :class:`~planexec.llm.scripted.
    ScriptedChatModel`, the SHA-256 of its script (its replies and how it streams them).
    """
    model = base if base is not None else inner
    identity: dict[str, Any] = {"class": type(model).__name__}
    if isinstance(model, ScriptedChatModel):
        script = {
            "replies": [r.model_dump(mode="json") for r in model.replies],
            "stream_chunk_chars": model.stream_chunk_chars,
        }
        identity["script"] = hashlib.sha256(
            json.dumps(script, sort_keys=True, default=str).encode("utf-8", "surrogatepass")
        ).hexdigest()
        return identity
    if isinstance(model, BaseChatModel):
        try:
            params = dict(model._get_invocation_params(stop=None))
        except Exception:  # a model that cannot say its settings: its class and endpoint
            params = {}
        params.pop("stop", None)  # passed with the call: part of the key already
        identity["settings"] = shown_params(params)
    for name in ENDPOINT_SETTINGS:
        value = getattr(model, name, None)
        if isinstance(value, str) and value:
            identity["endpoint"] = shown_url(value)
            break
    return identity


async def _request_reply(request: Request) -> BaseMessage:
    """Make the model call itself (see :func:`request_reply`)."""
    caller = asyncio.get_running_loop()
    conduct = _conduct(request)
    producer: _Producer | None = None
    events: asyncio.Queue[Event] = asyncio.Queue()

    def deliver_to(target: asyncio.Queue[Event]) -> Callable[[Event], None]:
        def deliver(event: Event) -> None:
            with contextlib.suppress(RuntimeError):  # the caller's loop has closed
                caller.call_soon_threadsafe(target.put_nowait, event)

        return deliver

    try:
        op = next(conduct)
        while True:
            answer: Event | None = None
            if isinstance(op, _Start):
                if producer is not None:
                    producer.cancel()
                events = asyncio.Queue()
                producer = _Producer(
                    request, op.streamed, deliver_to(events), copy_context(), mode_of(request)
                )
            elif isinstance(op, _Wait):
                with contextlib.suppress(TimeoutError):
                    answer = await asyncio.wait_for(events.get(), max(op.seconds, 0.0))
            else:
                await asyncio.sleep(op.seconds)
            op = conduct.send(answer)
    except StopIteration as done:
        reply: BaseMessage = done.value
        return reply
    finally:
        if producer is not None:
            producer.cancel()


def _conduct(request: Request) -> _Conduct:
    """Hold one call by its rules (tries, waits, deadlines), for :func:`request_reply`."""
    limits = request.limits
    who = "model" if request.who == "model" else f"{request.who} model"
    deadline = time.monotonic() + limits.total
    streamed = request.watch is not None and not _cannot_stream(request.base)
    tries = 0
    while True:
        tries += 1
        yield _Start(streamed)
        chunks: list[BaseMessage] = []
        last_finish: str | None = None
        while True:
            left = deadline - time.monotonic()
            idle = streamed and limits.idle < left
            event = (yield _Wait(limits.idle if idle else left)) if left > 0 else None
            if event is None:
                if idle:
                    raise ModelTimeoutError(
                        f"the {who} sent no part of its reply for {limits.idle:g} s "
                        f"(its idle limit, {request.who}_timeouts.idle)"
                    )
                raise ModelTimeoutError(
                    f"the {who} did not answer within {limits.total:g} s "
                    f"(its total limit, {request.who}_timeouts.total)"
                )
            kind, value = event
            if kind == "chunk":
                said = _finish_of(value)
                last_finish = said or last_finish
                chunks.append(value)
                if request.watch is not None:
                    request.watch(value)
                continue
            if kind == "whole":
                if request.watch is not None:
                    request.watch(value)
                return finished(value, request.base, who)
            if kind == "end" and chunks:
                _streamed_fine(request.base)
                reply = _joined(chunks, last_finish)
                if not (_empty(reply) and streamed):
                    return finished(reply, request.base, who)
                # An empty streamed reply: LangChain's clients drop a streamed refusal, so it
                # is asked once more whole, which carries the provider's words if it refused.
                streamed, tries = False, tries - 1
                break
            if kind == "end":  # an empty stream: asked once more, whole (this time only)
                streamed, tries = False, tries - 1
                break
            if streamed and not chunks and _no_chunks(value):
                _no_stream_again(request.base)  # twice in a row: asked whole from now on
                streamed, tries = False, tries - 1
                break
            failure = provider_failure(value)
            if failure is None and _provider_integration(request.base) and _unreadable(value):
                raise IncompleteReplyError(
                    f"the {who}'s reply could not be read ({type(value).__name__}: "
                    f"{str(value)[:300]})",
                    reason="unreadable",
                )
            if chunks:  # part of the reply was shown: not asked again here (see broke_off)
                raise _broke_off(value, failure, who)
            may_pass = failure.may_pass if failure is not None else is_transient(value)
            if failure is None and not may_pass:
                raise value  # not a provider's error, and asking again cannot pass: as it is
            if not may_pass or tries >= MAX_TRIES:
                why = "it cannot pass by asking again" if not may_pass else None
                raise _given_up(value, failure, who, why or f"after {tries} tries")
            retry_after = failure.retry_after if failure is not None else None
            wait = max(retry_after or 0.0, min(FIRST_BACKOFF * 2 ** (tries - 1), MAX_BACKOFF))
            left = deadline - time.monotonic()
            if wait >= left:
                raise _given_up(
                    value,
                    failure,
                    who,
                    f"the provider asks to wait {wait:g} s, past this call's deadline "
                    f"({max(left, 0):.1f} s left of {limits.total:g} s, "
                    f"{request.who}_timeouts.total)"
                    if retry_after
                    else f"no time left to ask again within {limits.total:g} s",
                )
            yield _Pause(wait)
            break


def _given_up(
    exc: BaseException, failure: ProviderFailure | None, who: str, why: str
) -> ModelCallError:
    """Return the error a call that will not be asked again raises: never transient."""
    if failure is not None:
        return ProviderError(failure.said(who, why))
    said = str(exc).strip()[:1000] or "no message"
    return ModelCallError(f"the {who} failed ({type(exc).__name__}): {said} ({why})")


def _broke_off(exc: BaseException, failure: ProviderFailure | None, who: str) -> BaseException:
    """Return the error of a reply that broke off after part of it was shown.

    Transient (:func:`planexec.errors.broke_off`) if the error may pass: the watcher's caller
    may start a new conversation. Any other error than a provider's is raised as it is.
    """
    why = "after part of its reply had come"
    if failure is not None:
        return ProviderError(failure.said(who, why), transient=failure.may_pass)
    if is_transient(exc):
        said = str(exc).strip()[:1000] or "no message"
        what = f"the {who} failed ({type(exc).__name__}): {said} ({why})"
        return ModelCallError(what, transient=True)
    return exc


# --- provider errors ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ProviderFailure:
    """A provider's error as planexec reads it: what it said, and whether asking again may pass.

    ``may_pass`` is :func:`planexec.errors.is_transient`'s answer: the one classifier.
    """

    status: int | None
    code: str | None
    message: str
    may_pass: bool
    retry_after: float | None = None
    endpoint: str | None = None
    """Where the request went (:func:`planexec.llm.endpoint.endpoint_of`), when the error says."""

    def said(self, who: str, why: str) -> str:
        """Return the error's message for a user: the provider's words, and what planexec did.

        It names the endpoint the request went to, when known: a bad base URL fails every
        call the same way, and only the URL tells which setting is wrong.
        """
        head = f"HTTP {self.status}" if self.status is not None else "no HTTP status"
        code = f" {self.code}" if self.code else ""
        at = f" at {self.endpoint}" if self.endpoint else ""
        return f"the {who}'s provider{at} failed the call ({head}{code}): {self.message} ({why})"


def provider_failure(exc: BaseException) -> ProviderFailure | None:
    """Read an HTTP client's error (openai, anthropic, httpx and alike); None for other errors."""
    failure = _provider_failure(exc)
    if failure is None:
        return None
    return replace(failure, endpoint=endpoint_of(exc), message=urls_shown(failure.message))


def _provider_failure(exc: BaseException) -> ProviderFailure | None:
    response = getattr(exc, "response", None)
    status = getattr(exc, "status_code", None) or getattr(response, "status_code", None)
    if isinstance(status, int) and response is not None:
        body = getattr(exc, "body", None)
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            body = body["error"]
        fields = body if isinstance(body, dict) else {}
        code = fields.get("code") or fields.get("type")
        message = str(fields.get("message") or exc).strip()
        return ProviderFailure(
            status=status,
            code=str(code) if code else None,
            message=message[:1000],
            may_pass=is_transient(exc),
            retry_after=_retry_after(getattr(response, "headers", None)),
        )
    if is_connection_failure(exc):
        return ProviderFailure(
            status=None, code=type(exc).__name__, message=str(exc)[:1000], may_pass=True
        )
    body = getattr(exc, "body", None)
    if _named(exc, "APIError") and not isinstance(body, dict):  # {"error": "some text"}
        words = str(body or exc)[:1000]
        return ProviderFailure(status=None, code=None, message=words, may_pass=is_transient(exc))
    if _named(exc, "APIError") and isinstance(body, dict):  # an error event in a 200 stream
        inner = body.get("error")
        said: dict[str, Any] = inner if isinstance(inner, dict) else body
        code = str(said.get("code") or said.get("type") or "") or None
        return ProviderFailure(
            status=None,
            code=code,
            message=str(said.get("message") or exc)[:1000],
            may_pass=is_transient(exc),
        )
    return None


def _named(exc: BaseException, *names: str) -> bool:
    return any(kind.__name__ in names for kind in type(exc).__mro__)


def _retry_after(headers: Any) -> float | None:
    """Seconds the provider asks to wait (``retry-after-ms`` or ``retry-after``), if any."""
    if headers is None:
        return None
    with contextlib.suppress(TypeError, ValueError):
        millis = headers.get("retry-after-ms")
        if millis is not None and math.isfinite(float(millis)):
            return max(float(millis) / 1000, 0.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = None
    if seconds is not None:
        return max(seconds, 0.0) if math.isfinite(seconds) else None
    with contextlib.suppress(TypeError, ValueError):
        when = email.utils.parsedate_to_datetime(value)
        return max(when.timestamp() - time.time(), 0.0)
    return None


def _empty(reply: BaseMessage) -> bool:
    """Say whether a reply holds nothing: no text, no tool call (readable or not)."""
    content = reply.content
    text = content.strip() if isinstance(content, str) else bool(content)
    calls = getattr(reply, "tool_calls", None) or getattr(reply, "invalid_tool_calls", None)
    return not text and not calls and not reply.additional_kwargs.get("refusal")


def _no_chunks(exc: Any) -> bool:
    """LangChain's word for a streamed request answered without a stream."""
    return isinstance(exc, ValueError) and "No generation chunks" in str(exc)


# Models whose server answered a streamed request with no chunk, by id (compared by identity:
# an id reused by a new model does not match); planexec's model instances are cached.
_cannot: dict[int, Any] = {}
_cannot_lock = threading.Lock()


def _cannot_stream(base: object) -> bool:
    with _cannot_lock:
        return _cannot.get(id(base)) is base


_empty_streams: dict[int, int] = {}


def _no_stream_again(base: object) -> None:
    """Count a streamed request answered with no chunk.

    The second in a row means the server cannot stream (it answers whole): the model is asked
    whole from then on. One empty stream (a glitch) does not turn streaming off.
    """
    with _cannot_lock:
        times = _empty_streams.get(id(base), 0) + 1
        _empty_streams[id(base)] = times
        if times >= 2:
            _cannot[id(base)] = base


def _streamed_fine(base: object) -> None:
    with _cannot_lock:
        _empty_streams.pop(id(base), None)


# --- whole replies ------------------------------------------------------------------------------

NORMAL_ENDS = frozenset(
    {
        "stop",
        "tool_calls",
        "function_call",
        "end_turn",
        "tool_use",
        "stop_sequence",
        "eos",
        "eos_token",
        "STOP",
        "FINISH_REASON_STOP",
    }
)
"""Finish reasons (OpenAI and compatible servers, Anthropic, Ollama, Google) of a reply that
ended normally; any other is a reply that did not."""

WHAT_IT_MEANS = {
    "length": "it reached its output token limit",
    "max_tokens": "it reached its output token limit",
    "MAX_TOKENS": "it reached its output token limit",
    "content_filter": "the provider's content filter stopped it",
    "SAFETY": "the provider's safety filter stopped it",
    "refusal": "the model refused",
}

PROVIDER_PACKAGES = (
    "langchain_openai",
    "langchain_anthropic",
    "langchain_ollama",
    "langchain_google_genai",
    "langchain_groq",
    "langchain_deepseek",
    "langchain_xai",
)
"""Provider integrations: their async clients never block the background loop, and their replies
always carry a finish reason (one without it was cut off)."""


def unfinished(reply: BaseMessage, base: object) -> tuple[str, str] | None:
    """Return ``(what happened, the provider's reason)`` for a reply that did not end normally.

    None for a reply that did: a normal finish reason, or none from a model that never reports
    one (scripted and custom models).
    """
    refusal = reply.additional_kwargs.get("refusal")
    if not refusal and isinstance(reply.content, list):
        refusal = next(
            (b.get("refusal") for b in reply.content if isinstance(b, dict) and b.get("refusal")),
            None,
        )
    if refusal:
        return f"was a refusal: {str(refusal)[:2000]!r}", "refusal"
    finish = _finish_of(reply)
    if finish is None:
        if _provider_integration(base):
            return "was cut off: it ended without a finish reason", "none"
        return None
    if str(finish) in NORMAL_ENDS:
        return None
    meaning = WHAT_IT_MEANS.get(str(finish), "not a normal end")
    return f"was cut off: finish_reason {str(finish)!r} ({meaning})", str(finish)


def finished(reply: BaseMessage, base: object, who: str) -> BaseMessage:
    """Return ``reply`` if it ended normally; raise :class:`IncompleteReplyError` if not."""
    problem = unfinished(reply, base)
    if problem is None:
        return reply
    said, reason = problem
    raise IncompleteReplyError(f"the {who}'s reply {said}", reason=reason)


def _joined(chunks: list[BaseMessage], finish: str | None = None) -> BaseMessage:
    """Join a streamed reply's chunks in one merge (adding them one by one is quadratic).

    The finish reason is the last one a chunk said (LangChain's merge would join two into
    one string, ``tool_callstool_calls``).
    """
    first, rest = chunks[0], chunks[1:]
    if isinstance(first, BaseMessageChunk) and rest:
        first = first + rest  # a list: merged at once
    if isinstance(first, BaseMessageChunk):
        first = message_chunk_to_message(first)
    if finish is not None:
        first.response_metadata = {
            **first.response_metadata,
            **{k: finish for k in FINISH_KEYS if k in first.response_metadata},
        }
    return first


FINISH_KEYS = ("finish_reason", "stop_reason", "done_reason")


def _finish_of(message: BaseMessage) -> str | None:
    """Return the finish reason a message (or chunk) says, if any."""
    meta = message.response_metadata or {}
    said = next((meta[k] for k in FINISH_KEYS if meta.get(k)), None)
    return str(said) if said is not None else None


def _unreadable(exc: BaseException) -> bool:
    """Say whether a provider client failed to read a malformed reply.

    The errors a parser of a reply raises (``"choices": []`` is an IndexError in
    langchain-openai).
    """
    return isinstance(exc, IndexError | KeyError | TypeError | AttributeError | ValueError)


_HIGH = re.compile("[\ud800-\udbff]$")
_SURROGATES = re.compile("[\ud800-\udfff]")


def _whole_text(text: str) -> tuple[str, str]:
    """Split ``text`` into what can be shown now and a trailing half character to hold back."""
    held = ""
    if _HIGH.search(text):
        text, held = text[:-1], text[-1]
    if _SURROGATES.search(text):  # halves that came in two chunks: one character again
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text, held


class _Mender:
    """Mends a reply's chunks as they stream: split characters joined, repeated names dropped."""

    def __init__(self) -> None:
        self.content = ""
        self.args: dict[Any, str] = {}
        self.names: dict[Any, str] = {}
        self.ids: dict[Any, str] = {}

    def mend(self, chunk: BaseMessage) -> BaseMessage:
        if not isinstance(chunk, AIMessageChunk):
            return chunk
        update: dict[str, Any] = {}
        if isinstance(chunk.content, str) and (chunk.content or self.content):
            update["content"], self.content = _whole_text(self.content + chunk.content)
        pieces = []
        for piece in chunk.tool_call_chunks:
            index, mended = piece.get("index"), dict[str, Any](piece)
            args = piece.get("args")
            if isinstance(args, str):
                mended["args"], self.args[index] = _whole_text(self.args.get(index, "") + args)
            for key, seen in (("name", self.names), ("id", self.ids)):
                value = mended.get(key)
                if not isinstance(value, str):
                    continue
                if value and seen.get(index) == value:
                    mended[key] = None  # said again in a later delta: said once
                elif value:
                    seen[index] = value
            pieces.append(mended)
        if pieces:
            update["tool_call_chunks"] = pieces
        if not update:
            return chunk
        data = chunk.model_dump(exclude={"tool_calls", "invalid_tool_calls"})
        return AIMessageChunk(**{**data, **update})

    def rest(self) -> BaseMessage | None:
        """Return a last chunk with any half character still held (the stream ended on it)."""
        if not self.content and not any(self.args.values()):
            return None
        pieces: list[Any] = [
            {"index": i, "args": a, "name": None, "id": None, "type": "tool_call_chunk"}
            for i, a in self.args.items()
            if a
        ]
        return AIMessageChunk(content=self.content, tool_call_chunks=pieces)
