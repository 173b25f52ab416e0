"""The one retry layer: which failures are retried and how long to wait.

litellm's own retries are turned off at every call (num_retries=0, max_retries=0).
"""

from __future__ import annotations

import random
from typing import Any

import litellm

from rubriclab.secrets import redact_text


class MalformedResponseError(Exception):
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


def is_retryable(exc: BaseException) -> bool:
    """429, 5xx, timeouts, dropped connections and malformed bodies are retried; 4xx are final."""
    if isinstance(exc, _FINAL_TYPES):
        return False
    if isinstance(exc, _RETRYABLE_TYPES):
        return True
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status in _RETRYABLE_STATUS
    # unknown shape without a status (e.g. a body cut mid-JSON): a transport fault
    return isinstance(exc, (litellm.APIError, ConnectionError, TimeoutError, ValueError))


def retry_after_seconds(exc: BaseException) -> float | None:
    """The server's Retry-After (seconds), when it sent one."""
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
    return f"{type(exc).__name__}: {msg}"
