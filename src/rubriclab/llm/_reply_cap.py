"""The accepted size of a reply: no more of a reply's body is read than its call can use.

A server that ignores ``max_tokens`` can answer megabytes, and every byte is parsed, priced and stored. So each
call to a provider over the network carries a cap (``reply_cap_bytes``: room for ``max_tokens`` tokens of text, and
their logprobs when asked for, plus the JSON around them), and litellm's HTTP transport stops reading a body past
it (``ReplyTooLargeError``: final, never retried or re-asked). A body whose Content-Length is past the cap is not
read at all. Such a reply is counted at the cap (``cap_tokens``): what the gateway read of it, at most.

The cap rides on a context variable set around the call (``capped``) and is applied where litellm's default
transport (aiohttp) hands the body to httpx (``install``): calls made outside the gateway are not capped. A reply
that was read whole but holds more completion tokens than ``max_tokens`` is refused by the gateway the same way
(``check_reply``)."""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator
from typing import Any

from rubriclab.errors import RubricLabError

MARKER = "rubriclab: reply past its cap"
# room per token: its text (a token is rarely over 16 bytes, ~4 on average) and, with logprobs, each alternative's
# entry ({"token": …, "logprob": …, "bytes": […]}); plus the JSON envelope (id, usage, finish reason)
_TEXT_BYTES_PER_TOKEN = 32
_LOGPROB_BYTES_PER_ENTRY = 160
_ENVELOPE_BYTES = 4_096
BYTES_PER_TOKEN = 4  # what a cut reply is counted at: ~4 bytes of reply per token

_CAP: contextvars.ContextVar[int | None] = contextvars.ContextVar("rubriclab_reply_cap", default=None)


class ReplyTooLargeError(RubricLabError):
    """A reply's body was past its call's cap (``read``: bytes seen, or the Content-Length announced)."""

    def __init__(self, read: int, cap: int, whole: bool = False) -> None:
        self.read, self.cap = read, cap
        how = f"announced {read:,} bytes" if whole else f"sent more than {cap:,} bytes"
        super().__init__(f"{MARKER}: the server {how} (cap {cap:,} bytes): it ignores max_tokens")


def reply_cap_bytes(max_tokens: int, top_logprobs: int | None = None) -> int:
    """The most bytes of one reply's body the gateway reads for a call allowed ``max_tokens`` tokens."""
    per_token = _TEXT_BYTES_PER_TOKEN + (_LOGPROB_BYTES_PER_ENTRY * (1 + int(top_logprobs or 0))
                                         if top_logprobs is not None else 0)
    return _ENVELOPE_BYTES + int(max_tokens) * per_token


def cap_tokens(cap_bytes: int) -> int:
    """The completion tokens a reply cut at ``cap_bytes`` is counted at."""
    return math.ceil(cap_bytes / BYTES_PER_TOKEN)


@contextlib.contextmanager
def capped(cap_bytes: int | None) -> Iterator[None]:
    """Within the block, bodies read by litellm's transport in this task stop at ``cap_bytes`` (None: no cap)."""
    install()
    token = _CAP.set(cap_bytes)
    try:
        yield
    finally:
        _CAP.reset(token)


def is_reply_too_large(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from or while handling) is a reply past its cap: litellm and
    the OpenAI client wrap the transport's error in their own connection errors, which would otherwise be
    retried."""
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen and len(seen) < 20:
        if isinstance(cur, ReplyTooLargeError) or MARKER in str(cur):
            return True
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return getattr(exc, "type_name", None) == ReplyTooLargeError.__name__


def check_reply(resp: Any, max_tokens: int, cap_bytes: int) -> str | None:
    """Why a reply read whole cannot be accepted — more visible completion tokens than ``max_tokens`` (reasoning
    tokens apart: some providers count them outside the limit) or more text than the cap — or None."""
    usage = getattr(resp, "usage", None)
    completion = int(getattr(usage, "completion_tokens", 0) or 0)
    details = getattr(usage, "completion_tokens_details", None)
    reasoning = int(getattr(details, "reasoning_tokens", 0) or 0) if details is not None else 0
    choices = getattr(resp, "choices", None) or []
    text = getattr(getattr(choices[0], "message", None), "content", None) if choices else None
    chars = len(text) if isinstance(text, str) else 0
    if completion - reasoning > max_tokens:
        return (f"{MARKER}: {completion - reasoning:,} completion tokens for max_tokens={max_tokens} "
                f"({chars:,} characters): the server ignores max_tokens")
    if chars > cap_bytes:
        return f"{MARKER}: {chars:,} characters (cap {cap_bytes:,}): the server ignores max_tokens"
    return None


_INSTALLED = False


def install() -> None:
    """Make litellm's aiohttp transport honour the cap of the call reading a body (once per process)."""
    global _INSTALLED
    if _INSTALLED:
        return
    _INSTALLED = True
    try:
        from litellm.llms.custom_httpx.aiohttp_transport import AiohttpResponseStream
    except ImportError:  # another litellm layout: replies are still refused after the fact (check_reply)
        return
    whole = AiohttpResponseStream.__aiter__

    async def capped_iter(self: Any) -> Any:
        cap = _CAP.get()
        if cap is None:
            async for chunk in whole(self):
                yield chunk
            return
        announced = getattr(self._aiohttp_response, "content_length", None)
        if announced is not None and announced > cap:
            self._aiohttp_response.close()
            raise ReplyTooLargeError(announced, cap, whole=True)
        read = 0
        body = whole(self)
        try:
            async for chunk in body:
                read += len(chunk)
                if read > cap:
                    raise ReplyTooLargeError(read, cap)
                yield chunk
        finally:
            await body.aclose()  # releases the connection (the transport's own finally)

    AiohttpResponseStream.__aiter__ = capped_iter
