"""A fake OpenAI-compatible HTTP server for tests and benchmarks.

It speaks just enough of the OpenAI REST API (chat completions, embeddings, models) for litellm's
``openai/`` provider, answers deterministically, and injects faults from a seeded plan so retry and parse-failure paths can be exercised without a network
or a real provider. Transport faults (``FAULT_KINDS``: 429 with Retry-After, 500, hangs, garbage bodies
that are not a provider response, truncated JSON, dropped connections) must be retried with the same
request; the opt-in content fault ``unparseable`` (a well-formed completion whose text no parser accepts)
is what a re-ask is for.

For probes of what leaves the client, the server (with ``record=True``, or any quoting) keeps everything it receives
(``received_requests``: method, path with query, headers, body) and can quote all of it back (``quote_status``: every
POST answered with that status and an error message quoting the request; ``quote_replies``: the quote appended to
every reply's text). ``reply_chars`` makes it a server that ignores ``max_tokens`` (every reply that many characters,
usage counted from them), and ``chunked`` sends bodies without a Content-Length.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import math
import random
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from rubriclab.errors import ArgumentError

try:  # orjson is ~5x faster; the benchmark pushes ~1000 req/s through two cores.
    import orjson

    def _dumps(obj: Any) -> bytes:
        return orjson.dumps(obj)

    def _loads(data: bytes) -> Any:
        return orjson.loads(data)

    def _canonical(obj: Any) -> bytes:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)

except ImportError:  # pragma: no cover - orjson ships with litellm/mlflow deps
    import json

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    def _loads(data: bytes) -> Any:
        return json.loads(data)

    def _canonical(obj: Any) -> bytes:
        return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


__all__ = [
    "FAULT_KINDS",
    "FakeOpenAIServer",
    "FaultPlan",
    "default_responder",
    "fake_embedding",
    "request_key",
]

# Transport faults: the reply is not a usable provider response, so the client retries the same request.
FAULT_KINDS: tuple[str, ...] = ("429", "500", "hang", "garbage", "truncated", "drop")
# Content faults (opt-in, not in the default plan): a well-formed completion whose text no parser accepts,
# which the gateway re-asks (a different request) rather than retries.
CONTENT_FAULT_KINDS: tuple[str, ...] = ("unparseable",)
ALL_FAULT_KINDS: tuple[str, ...] = FAULT_KINDS + CONTENT_FAULT_KINDS
# "garbage" bodies, chosen by the request key: none of them is a chat completion a client may use
_GARBAGE_BODIES: tuple[tuple[bytes, str], ...] = (
    (b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html"),
    (b"\x89\x00\xffqzx not json", "application/json"),
    (b'{"status": "ok"}', "application/json"),  # JSON, but no choices
    (b'{"id": "chatcmpl-garbage", "object": "chat.completion", "created": 0, "model": "fake", "choices": []}',
     "application/json"),
    (b'{"id": "chatcmpl-garbage", "object": "chat.completion", "created": 0, "model": "fake", "choices": '
     b'[{"index": 0, "message": {"role": "assistant", "content": null}, "finish_reason": "stop"}]}',
     "application/json"),
)
EMBEDDING_DIM = 8
_RECEIVED = web.RequestKey("received", dict)  # what the request carried, kept by the middleware for the handler

# Consonants only, no 'a'/'b': garbage text can never spell a verdict (A/B/Yes/No/tie) or JSON.
_GARBAGE_LETTERS = "cdfghjklmnpqrstvwxz"


@dataclass(frozen=True)
class FaultPlan:
    """Seeded fault injection: which request keys fail, how, and how many times.

    A key (hash of the request body) is faulted with probability ``rate``; its fault kind is drawn
    from ``kinds``, uniformly or in proportion to ``weights`` (one per kind: a "hang" costs the client's whole
    timeout, so a plan may draw it less often than the quick kinds). Both draws depend only on (seed, key), so a
    plan is reproducible across runs and processes. A faulted key fails on its first ``max_faults_per_key``
    attempts, then is served normally, so every request eventually succeeds under retries.
    """

    rate: float
    kinds: tuple[str, ...] = FAULT_KINDS
    seed: int = 0
    max_faults_per_key: int = 1
    retry_after: float = 0.05
    hang_seconds: float = 30.0
    weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ArgumentError(f"FaultPlan.rate must be in [0, 1], got {self.rate!r}")
        if not self.kinds:
            raise ArgumentError("FaultPlan.kinds must name at least one fault kind")
        unknown = [k for k in self.kinds if k not in ALL_FAULT_KINDS]
        if unknown:
            raise ArgumentError(f"FaultPlan.kinds has unknown kinds {unknown}; expected a subset of {ALL_FAULT_KINDS}")
        if self.max_faults_per_key < 0:
            raise ArgumentError("FaultPlan.max_faults_per_key must be >= 0")
        if self.weights is not None and (len(self.weights) != len(self.kinds) or min(self.weights) < 0
                                         or not sum(self.weights) > 0):
            raise ArgumentError(f"FaultPlan.weights must be one non-negative weight per kind ({len(self.kinds)}: "
                                f"{self.kinds}), not all zero; got {self.weights!r}")

    def decide(self, key: str) -> str | None:
        """Return the fault kind assigned to ``key``, or None if the key is never faulted."""
        if self.rate <= 0.0:
            return None
        h = hashlib.sha256(f"{self.seed}:{key}".encode()).digest()
        u = int.from_bytes(h[:8], "big") / 2.0**64
        if u >= self.rate:
            return None
        if self.weights is None:
            return self.kinds[int.from_bytes(h[8:16], "big") % len(self.kinds)]
        v = int.from_bytes(h[8:16], "big") / 2.0**64 * sum(self.weights)
        for kind, cumulative in zip(self.kinds, itertools.accumulate(self.weights)):
            if v < cumulative:
                return kind
        return next(k for k, w in zip(reversed(self.kinds), reversed(self.weights)) if w > 0)  # v rounded up to the sum


def request_key(body: dict[str, Any]) -> str:
    """Stable key of a request: sha1 of its canonical JSON body (messages + all params)."""
    return hashlib.sha1(_canonical(body)).hexdigest()


def _schema_instance(schema: Any, token: str, depth: int = 0) -> Any:
    """A minimal value satisfying a (simple) JSON schema, so JSON-mode callers can parse it."""
    if not isinstance(schema, dict) or depth > 6:
        return token
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for alt in ("anyOf", "oneOf"):
        if schema.get(alt):
            return _schema_instance(schema[alt][0], token, depth + 1)
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null")
    if t == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        required = schema.get("required") or list(props)
        return {k: _schema_instance(props.get(k, {}), token, depth + 1) for k in required}
    if t == "array":
        n = int(schema.get("minItems", 0))
        return [_schema_instance(schema.get("items", {}), token, depth + 1) for _ in range(n)]
    if t == "integer":
        return int(schema.get("minimum", 0))
    if t == "number":
        return float(schema.get("minimum", 0.0))
    if t == "boolean":
        return False
    if t == "null":
        return None
    return token


def default_responder(body: dict[str, Any]) -> str:
    """Deterministic reply: identical requests give identical replies; samples differ.

    The digest covers ``messages``, ``temperature``, ``seed`` and ``user`` because rubriclab
    distinguishes repeated samples at T>0 by a sample index sent as ``seed`` or ``user``.
    With ``response_format`` json_object/json_schema the reply is a small valid JSON object
    (fitting the schema's required properties where one is given).
    """
    material = _canonical([body.get("messages"), body.get("temperature"), body.get("seed"), body.get("user")])
    token = "echo:" + hashlib.sha1(material).hexdigest()[:12]
    rf = body.get("response_format")
    if isinstance(rf, dict) and rf.get("type") in ("json_object", "json_schema"):
        schema = None
        if rf.get("type") == "json_schema":
            js = rf.get("json_schema") or {}
            schema = js.get("schema") if isinstance(js, dict) else None
        elif "schema" in rf:  # llama.cpp-style json_object + schema
            schema = rf.get("schema")
        value = _schema_instance(schema, token) if schema else {"reply": token}
        if not isinstance(value, dict):
            value = {"reply": value}
        return _dumps(value).decode()
    return token


def fake_embedding(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """Deterministic, L2-normalised pseudo-embedding of ``text`` from its sha256."""
    h = hashlib.sha256(text.encode()).digest()
    raw = [(b / 127.5) - 1.0 for b in h[:dim]]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    return [x / norm for x in raw]


def _garbage_text(key: str) -> str:
    rng = random.Random(key)
    return " ".join(
        "".join(rng.choice(_GARBAGE_LETTERS) for _ in range(rng.randint(4, 9))) for _ in range(rng.randint(3, 8))
    )


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _prompt_text(messages: Any) -> str:
    parts: list[str] = []
    if isinstance(messages, list):
        for m in messages:
            c = m.get("content") if isinstance(m, dict) else None
            if isinstance(c, str):
                parts.append(c)
            elif isinstance(c, list):  # content parts
                parts.extend(p.get("text", "") for p in c if isinstance(p, dict))
    return "\n".join(parts)


class FakeOpenAIServer:
    """OpenAI-compatible server on aiohttp, run in a background thread with its own event loop.

    Use as a context manager, or ``start()``/``stop()``. ``url`` ends in ``/v1`` (pass it as
    litellm's ``api_base``). Latency is an ``asyncio.sleep`` applied to every HTTP-200 answer: ``latency``
    seconds, or with ``latency_jitter`` a draw from uniform(latency - jitter, latency + jitter), seeded by
    ``jitter_seed`` (a real provider's answers vary in time; a constant one keeps concurrent clients in step).
    """

    def __init__(
        self,
        latency: float = 0.0,
        faults: FaultPlan | None = None,
        responder: Callable[[dict], str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        latency_jitter: float = 0.0,
        jitter_seed: int = 0,
        record: bool = False,
        quote_status: int | None = None,
        quote_replies: bool = False,
        reply_chars: int | None = None,
        chunked: bool = False,
    ) -> None:
        if not 0.0 <= latency_jitter <= latency:
            raise ArgumentError(f"latency_jitter must be between 0 and latency ({latency}), got {latency_jitter}")
        self.latency = float(latency)
        self.latency_jitter = float(latency_jitter)
        self._jitter_rng = random.Random(jitter_seed)
        self.faults = faults
        self.responder = responder or default_responder
        self.host = host
        self.port = port
        self._lock = threading.Lock()
        self._requests = 0
        self._in_flight = self._peak_in_flight = 0
        self._ok = 0
        self._embeddings_ok = 0
        self._fault_counts: dict[str, int] = {k: 0 for k in FAULT_KINDS}
        self._attempts: dict[str, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._hang_tasks: set[asyncio.Task] = set()
        self.quote_status, self.quote_replies = quote_status, quote_replies
        # what requests carried is kept only when asked for: the benchmarks push ~1000 requests/s through here
        self.record = record or quote_status is not None or quote_replies
        self.reply_chars, self.chunked = reply_chars, chunked
        self.received_requests: list[dict[str, Any]] = []  # every request as it came: method, path_qs, headers, body

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL for OpenAI clients, e.g. ``http://127.0.0.1:PORT/v1``."""
        if not self.port:
            raise RuntimeError("FakeOpenAIServer is not started")
        return f"http://{self.host}:{self.port}/v1"

    def _make_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024**2, middlewares=[self._receive] if self.record else [])
        for prefix in ("/v1", ""):
            app.router.add_post(prefix + "/chat/completions", self._chat)
            app.router.add_post(prefix + "/embeddings", self._embeddings)
            app.router.add_get(prefix + "/models", self._models)
        app.router.add_get("/stats", self._stats_handler)
        return app

    async def start_async(self) -> None:
        """Start listening on the current event loop (used by the foreground CLI)."""
        # access_log=None: per-request logging is the largest avoidable cost at ~1000 req/s.
        # shutdown_timeout small so stop() does not wait on hung requests.
        self._runner = web.AppRunner(self._make_app(), access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024, reuse_address=True)
        await site.start()
        # With port=0 the OS picks one; read it back from the bound socket.
        self.port = self._runner.addresses[0][1]

    async def stop_async(self) -> None:
        """Stop listening and cancel in-flight hangs."""
        for t in list(self._hang_tasks):
            t.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def start(self) -> FakeOpenAIServer:
        """Run the server in a background thread; return once it is listening."""
        if self._thread is not None:
            raise RuntimeError("FakeOpenAIServer already started")
        ready = threading.Event()
        error: list[BaseException] = []
        loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as exc:  # surface bind errors to the caller of start()
                error.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="FakeOpenAIServer", daemon=True)
        self._thread.start()
        ready.wait()
        if error:
            self._thread.join()
            self._thread = self._loop = None
            raise error[0]
        return self

    def stop(self) -> None:
        """Stop the server and join its thread (idempotent)."""
        if self._thread is None or self._loop is None:
            return
        fut = asyncio.run_coroutine_threadsafe(self.stop_async(), self._loop)
        try:
            fut.result(timeout=10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._thread = self._loop = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- stats ---------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counts so far: ``requests``, ``completions_ok``, ``embeddings_ok``, ``faults`` by kind,
        ``attempts`` per request key (POST endpoints only), ``peak_in_flight`` (the most chat requests being
        answered at once)."""
        with self._lock:
            return {
                "requests": self._requests,
                "peak_in_flight": self._peak_in_flight,
                "completions_ok": self._ok,
                "embeddings_ok": self._embeddings_ok,
                "faults": dict(self._fault_counts),
                "attempts": dict(self._attempts),
            }

    @web.middleware
    async def _receive(self, request: web.Request, handler: Callable) -> web.StreamResponse:
        """Keep what the request carried; with ``quote_status``, answer every POST with an error quoting it."""
        raw = await request.read()  # cached: the handler reads the same bytes
        entry = {"method": request.method, "path_qs": request.path_qs, "headers": dict(request.headers),
                 "body": raw.decode("utf-8", "replace")}
        with self._lock:
            self.received_requests.append(entry)
        request[_RECEIVED] = entry
        if self.quote_status is not None and request.method == "POST":
            with self._lock:
                self._requests += 1
            return _error(self.quote_status, "invalid_request_error", "rejected; received: " + quote_request(entry))
        if request.method == "POST" and not request.path.endswith(("/chat/completions", "/embeddings")) \
                and "/chat/completions" in request.path_qs:
            return await self._chat(request)  # a client that put the route after a query string (?key=…)
        return await handler(request)

    async def _stats_handler(self, request: web.Request) -> web.Response:
        return web.Response(body=_dumps(self.stats()), content_type="application/json")

    # -- handlers ------------------------------------------------------------------------------

    def _delay(self) -> float:
        if not self.latency_jitter:
            return self.latency
        return self._jitter_rng.uniform(self.latency - self.latency_jitter, self.latency + self.latency_jitter)

    async def _read(self, request: web.Request) -> tuple[dict | None, web.Response | None]:
        raw = await request.read()
        try:
            body = _loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return None, _error(400, "invalid_request_error", "request body is not a JSON object")
        return body, None

    async def _maybe_fault(self, request: web.Request, body: dict) -> tuple[str, web.StreamResponse | None]:
        """Count the attempt; return (key, fault response or None)."""
        key = request_key(body)
        with self._lock:
            self._requests += 1
            attempt = self._attempts.get(key, 0)
            self._attempts[key] = attempt + 1
        plan = self.faults
        if plan is None or attempt >= plan.max_faults_per_key:
            return key, None
        kind = plan.decide(key)
        if kind is None:
            return key, None
        with self._lock:
            self._fault_counts[kind] = self._fault_counts.get(kind, 0) + 1
        if kind == "429":
            resp = _error(429, "rate_limit_error", "Rate limit reached (injected fault)", code="rate_limit_exceeded")
            resp.headers["Retry-After"] = f"{plan.retry_after:g}"
            return key, resp
        if kind == "500":
            return key, _error(500, "server_error", "The server had an error (injected fault)")
        if kind == "drop":
            # Abort (RST) rather than a graceful close: the client sees a connection error.
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError  # aiohttp treats this as a dropped peer; nothing is written
        if kind == "hang":
            task = asyncio.current_task()
            if task is not None:
                self._hang_tasks.add(task)
            try:
                await asyncio.sleep(plan.hang_seconds)
            finally:
                if task is not None:
                    self._hang_tasks.discard(task)
            return key, None  # past the client's timeout; answer normally if anyone is still there
        return key, _FaultMarker(kind)  # garbage / truncated / unparseable: shaped by the endpoint handler

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        with self._lock:
            self._in_flight += 1
            self._peak_in_flight = max(self._peak_in_flight, self._in_flight)
        try:
            return await self._answer_chat(request)
        finally:
            with self._lock:
                self._in_flight -= 1

    async def _answer_chat(self, request: web.Request) -> web.StreamResponse:
        body, err = await self._read(request)
        if err is not None:
            return err
        assert body is not None
        key, fault = await self._maybe_fault(request, body)
        if fault is not None and not isinstance(fault, _FaultMarker):
            return fault
        kind = fault.kind if isinstance(fault, _FaultMarker) else None
        if kind == "garbage":
            raw, ctype = _GARBAGE_BODIES[int(key[:8], 16) % len(_GARBAGE_BODIES)]
            return web.Response(body=raw, content_type=ctype)
        content = _garbage_text(key) if kind == "unparseable" else self.responder(body)
        if self.reply_chars is not None and kind is None:  # a server that ignores max_tokens
            content = (content + " " + "x" * self.reply_chars)[: self.reply_chars]
        if self.quote_replies:
            content += "\nreceived: " + (quote_request(request[_RECEIVED]) if _RECEIVED in request else "?")
        if self.latency > 0:
            await asyncio.sleep(self._delay())
        model = body.get("model", "fake")
        created = int(time.time())
        cid = "chatcmpl-" + key[:24]
        prompt_tokens = _tokens(_prompt_text(body.get("messages")))
        completion_tokens = _tokens(content)
        n = int(body.get("n") or 1)
        if body.get("stream") and kind is None:
            return await self._stream(request, cid, created, model, content, n)
        payload = {
            "id": cid,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": i,
                    "message": {"role": "assistant", "content": content},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
                for i in range(n)
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens * n,
                "total_tokens": prompt_tokens + completion_tokens * n,
            },
        }
        data = _dumps(payload)
        if kind == "truncated":
            data = data[: len(data) // 2]  # Content-Length follows the cut body
        elif kind is None:
            with self._lock:
                self._ok += 1
        if self.chunked:
            return await _send_chunked(request, data)
        return web.Response(body=data, content_type="application/json")

    async def _stream(
        self, request: web.Request, cid: str, created: int, model: str, content: str, n: int
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}
        for delta, finish in (({"role": "assistant", "content": content}, None), ({}, "stop")):
            chunk = dict(base, choices=[{"index": i, "delta": delta, "finish_reason": finish} for i in range(n)])
            await resp.write(b"data: " + _dumps(chunk) + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        with self._lock:
            self._ok += 1
        return resp

    async def _embeddings(self, request: web.Request) -> web.StreamResponse:
        body, err = await self._read(request)
        if err is not None:
            return err
        assert body is not None
        key, fault = await self._maybe_fault(request, body)
        if fault is not None and not isinstance(fault, _FaultMarker):
            return fault
        kind = fault.kind if isinstance(fault, _FaultMarker) else None
        if kind == "garbage":  # not an embeddings response (HTML, bytes, or JSON without data)
            raw, ctype = _GARBAGE_BODIES[int(key[:8], 16) % 3]
            return web.Response(body=raw, content_type=ctype)
        inputs = body.get("input")
        if isinstance(inputs, str) or (isinstance(inputs, list) and inputs and isinstance(inputs[0], int)):
            inputs = [inputs]
        if not isinstance(inputs, list):
            return _error(400, "invalid_request_error", "'input' must be a string or a list")
        texts = [x if isinstance(x, str) else _dumps(x).decode() for x in inputs]
        if self.latency > 0:
            await asyncio.sleep(self._delay())
        # The openai SDK asks for base64 by default and decodes float32 itself.
        b64 = body.get("encoding_format") == "base64"
        data = []
        for i, t in enumerate(texts):
            vec = fake_embedding(_garbage_text(key + t) if kind == "unparseable" else t)
            emb: Any = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode() if b64 else vec
            data.append({"object": "embedding", "index": i, "embedding": emb})
        tokens = sum(_tokens(t) for t in texts)
        out = _dumps(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "fake"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )
        if kind == "truncated":
            out = out[: len(out) // 2]
        elif kind is None:
            with self._lock:
                self._embeddings_ok += 1
        return web.Response(body=out, content_type="application/json")

    async def _models(self, request: web.Request) -> web.Response:
        return web.Response(
            body=_dumps(
                {"object": "list", "data": [{"id": "fake", "object": "model", "created": 0, "owned_by": "rubriclab"}]}
            ),
            content_type="application/json",
        )


# headers every HTTP client sends: left out of a quote, so what a caller chose to send comes first
_PLAIN_HEADERS = frozenset({"host", "accept", "accept-encoding", "connection", "content-type", "content-length",
                            "user-agent"})


def quote_request(entry: dict[str, Any]) -> str:
    """One line quoting everything a request carried that its client chose: method, path with query, each header
    but the boilerplate ones, then the body with its messages last (a probe's quote shows the credentials first, as
    a server's error cut short would)."""
    headers = "; ".join(f"{k}: {v}" for k, v in entry["headers"].items()
                        if k.lower() not in _PLAIN_HEADERS and not k.lower().startswith("x-stainless"))
    try:
        body = _loads(entry["body"].encode()) if entry["body"] else None
    except ValueError:
        body = None
    if isinstance(body, dict) and "messages" in body:
        body = {**{k: v for k, v in body.items() if k != "messages"}, "messages": body["messages"]}
        text = _dumps(body).decode()
    else:
        text = entry["body"]
    return f"{entry['method']} {entry['path_qs']} | {headers} | {text}"


async def _send_chunked(request: web.Request, data: bytes, piece: int = 65536) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "application/json"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    for i in range(0, len(data), piece):
        try:
            await resp.write(data[i : i + piece])
        except (ConnectionError, RuntimeError):  # the client stopped reading (a capped reply)
            return resp
    await resp.write_eof()
    return resp


@dataclass(frozen=True)
class _FaultMarker:
    """A fault shaped by the endpoint (garbage / truncated / unparseable) rather than a canned response."""

    kind: str


def _error(status: int, etype: str, message: str, code: str | None = None) -> web.Response:
    body = {"error": {"message": message, "type": etype, "param": None, "code": code or etype}}
    return web.Response(status=status, body=_dumps(body), content_type="application/json")
