"""The one retry layer: which failures are retried and how long to wait.

litellm's own retries are turned off at every call (num_retries=0, max_retries=0).
"""

from __future__ import annotations

import random
import re
from typing import Any

import httpx
import litellm
import openai

from rubriclab.errors import RubricLabError
from rubriclab.llm._reply_cap import ReplyTooLargeError, is_reply_too_large
from rubriclab.secrets import redact_text


class MalformedResponseError(RubricLabError):
    """The provider answered 200 with a body that is not a usable chat completion (no choices, no message
    content): a transport fault, retried with the same request. Only a well-formed reply whose text does
    not parse is re-asked."""


def check_response(resp: Any) -> None:
    """Raise MalformedResponseError unless ``resp`` carries a first choice with a text message."""
    choices = getattr(resp, "choices", None)
    if not choices:
        raise MalformedResponseError("provider response has no choices")
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    if not isinstance(content, str):
        if getattr(choices[0], "finish_reason", None) == "content_filter":
            return  # a refusal by the provider's filter: final, recorded as an empty reply
        raise MalformedResponseError(f"provider response has no message content (content={content!r})")


class RemoteFailure(RubricLabError):
    """A provider call's failure in a provider process (``llm._processes``), as this layer needs it: the error's
    class name (``type_name``) and message, whether it is retried (classified where it was raised), and the server's
    Retry-After in seconds."""

    def __init__(self, type_name: str, message: str, retryable: bool, retry_after: float | None) -> None:
        super().__init__(message)
        self.type_name = type_name
        self.retryable = retryable
        self.retry_after = retry_after

    def __reduce__(self) -> tuple:
        return RemoteFailure, (self.type_name, str(self), self.retryable, self.retry_after)


def error_name(exc: BaseException) -> str:
    """The class name a failure is recorded under (a provider process's failure: the original class's; a reply past
    its cap, however litellm wrapped it: ``ReplyTooLargeError``)."""
    if isinstance(exc, RemoteFailure):
        return exc.type_name
    return ReplyTooLargeError.__name__ if is_reply_too_large(exc) else type(exc).__name__


_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}
_RETRYABLE_TYPES = (
    litellm.RateLimitError, litellm.Timeout, litellm.APIConnectionError, litellm.InternalServerError,
    litellm.ServiceUnavailableError, litellm.BadGatewayError, litellm.APIResponseValidationError,
    MalformedResponseError,
)
_FINAL_TYPES = (
    litellm.AuthenticationError, litellm.PermissionDeniedError, litellm.NotFoundError,
    litellm.ContextWindowExceededError, litellm.ContentPolicyViolationError, litellm.BadRequestError,
)


try:  # litellm's default transport; its URL errors are configuration errors
    from aiohttp.client_exceptions import InvalidURL as _AiohttpInvalidURL
    from aiohttp.client_exceptions import NonHttpUrlClientError as _AiohttpNonHttpURL
    _AIOHTTP_URL_ERRORS: tuple[type[BaseException], ...] = (_AiohttpInvalidURL, _AiohttpNonHttpURL)
except ImportError:  # pragma: no cover - aiohttp ships with litellm
    _AIOHTTP_URL_ERRORS = ()
# A request that cannot be built from this configuration: an api_base no client can use (no scheme, not http)
_CONFIG_TYPES = (httpx.InvalidURL, httpx.UnsupportedProtocol, *_AIOHTTP_URL_ERRORS)
# what a client-side ValueError/TypeError says when the configuration, not the server, is at fault
_CONFIG_MESSAGE = re.compile(r"credential|api[_ -]?key|authori[sz]ation|authenticat|\bauth\b", re.IGNORECASE)


def _causes(exc: BaseException, limit: int = 20) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, outermost first."""
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in chain and len(chain) < limit:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    return chain


def _server_answered(exc: BaseException) -> bool:
    """Whether ``exc`` carries a real HTTP answer from the server. litellm's own exceptions are skipped: it
    gives every error it wraps a made-up ``status_code`` 500 and ``response``, whether or not a server was
    reached."""
    if isinstance(exc, httpx.HTTPStatusError):
        return True
    return isinstance(exc, openai.APIStatusError) and not type(exc).__module__.startswith("litellm")


def is_config_error(exc: BaseException) -> bool:
    """A call that failed before reaching any server, because of how it is configured: retrying cannot help.

    litellm reports these as ``InternalServerError`` (status 500) although no server answered, e.g.
    credentials both in the ``api_base`` URL and as an API key (aiohttp: "Cannot combine AUTHORIZATION header
    with AUTH argument or credentials encoded in URL"), a missing API key (the OpenAI client's own
    ``OpenAIError``: "Missing credentials"), or an ``api_base`` that is not a usable URL. Told apart by the
    exception chain: no HTTP answer from a server in it, and at its root a URL error, the OpenAI client's
    plain ``OpenAIError`` (raised before any request), or a plain ValueError/TypeError about credentials or
    authorization. A real 5xx, a dropped connection, a timeout or a body cut mid-JSON stays retryable."""
    chain = _causes(exc)
    if any(_server_answered(e) for e in chain):
        return False
    if any(isinstance(e, _CONFIG_TYPES) for e in chain):
        return True
    root = chain[-1]
    if type(root) is openai.OpenAIError:  # exactly the base class: the client refused to build the request
        return True
    return type(root) in (ValueError, TypeError) and bool(_CONFIG_MESSAGE.search(str(root)))


def is_retryable(exc: BaseException) -> bool:
    """429, 5xx, timeouts, dropped connections and malformed bodies are retried; 4xx and configuration
    errors (``is_config_error``: credentials, URLs, which litellm reports as a 500) are final."""
    if isinstance(exc, RemoteFailure):
        return exc.retryable
    if isinstance(exc, _FINAL_TYPES) or is_config_error(exc) or is_reply_too_large(exc):
        return False  # a reply past its cap would come back as large: asking again pays for it again
    if isinstance(exc, _RETRYABLE_TYPES):
        return True
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status in _RETRYABLE_STATUS
    # unknown shape without a status (e.g. a body cut mid-JSON): a transport fault
    return isinstance(exc, (litellm.APIError, ConnectionError, TimeoutError, ValueError))


def retry_after_seconds(exc: BaseException) -> float | None:
    """The server's Retry-After (seconds), when it sent one."""
    if isinstance(exc, RemoteFailure):
        return exc.retry_after
    header_sources = [getattr(exc, "headers", None), getattr(getattr(exc, "response", None), "headers", None),
                      getattr(exc, "litellm_response_headers", None)]
    for headers in header_sources:
        if not headers:
            continue
        try:
            value = headers.get("retry-after") or headers.get("Retry-After")
        except AttributeError:
            continue
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except (TypeError, ValueError):
            continue  # an HTTP-date: fall back to backoff
    return None


def backoff_seconds(retry: int, base: float = 0.5, cap: float = 30.0, rng: random.Random | None = None) -> float:
    """Exponential backoff with full jitter: uniform(0, min(cap, base·2^retry))."""
    rng = rng or random
    return rng.uniform(0, min(cap, base * (2 ** retry)))


def describe(exc: BaseException) -> str:
    """One line naming the error class and its message (never the request, which may hold keys)."""
    msg = redact_text(" ".join(str(exc).split()))  # a server may quote back the key it was sent
    if len(msg) > 300:
        msg = msg[:297] + "..."
    return f"{error_name(exc)}: {msg}"
