"""The one secret filter: what counts as a credential, for the call store, MLflow params and logs.

A key names a credential when any component of its (dotted) path contains ``api_key``, ``secret``,
``password``, ``credential`` or ``authorization``, or has ``key``/``token``/``auth``/``cookie`` as a
word (``apiKey``, ``hf_token``, ``X-Api-Key``). ``max_tokens`` (plural, a decoding knob) is not one.
A value shaped like a provider key (``sk-…``, ``hf_…``) or an auth header (``Bearer …``) is one
whatever its name. A URL keeps no credentials: ``user:password@`` and secret query parameters
(``?key=…``, ``?api-key=…``, ``?sig=…``) are cut wherever a URL appears in a logged value (``redact_urls``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote_plus, urlsplit, urlunsplit

__all__ = ["REDACTED", "is_secret_key", "looks_like_secret_value", "public_endpoint", "redact_text", "redact_urls",
           "scrub"]

_SECRET_WORDS = frozenset({
    "key", "apikey", "token", "secret", "secrets", "password", "passwd", "pwd", "credential", "credentials",
    "auth", "authorization", "cookie", "bearer",
})
_SECRET_SUBSTRINGS = ("api_key", "apikey", "secret", "password", "passwd", "credential", "authorization")
_SECRET_VALUE = re.compile(r"^(?:(?:sk-|sk_|hf_|ghp_|xox[abp]-|AKIA)[A-Za-z0-9_\-]{12,}|(?:Bearer|Basic)\s+\S{8,})$",
                           re.IGNORECASE)
# a URL inside any text: scheme://, then up to whitespace, a quote, an angle bracket, a parenthesis or a brace
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>(){}]+")
_SECRET_QUERY_NAMES = frozenset({"sig", "signature", "code", "access_token", "x-amz-signature", "x-goog-signature"})
# a provider-key-shaped or Authorization-header-shaped token inside any text
_SECRET_TOKEN = re.compile(r"(?i:\b(?:Bearer|Basic)\s+)[A-Za-z0-9._~+/=\-]{8,}"
                           r"|(?<![A-Za-z0-9])(?:sk-|sk_|hf_|ghp_|xox[abp]-|AKIA)[A-Za-z0-9_\-]{12,}")
REDACTED = "REDACTED"


def is_secret_key(path: str) -> bool:
    """True if a (dotted) key path names a credential (see the module docstring)."""
    for part in re.split(r"[./]", str(path)):
        low = part.lower()
        if any(s in low for s in _SECRET_SUBSTRINGS):
            return True
        words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", part).lower()
        if _SECRET_WORDS & set(re.split(r"[_\-\s]+", words)):
            return True
    return False


def looks_like_secret_value(value: Any) -> bool:
    """True for strings shaped like a provider key or an Authorization header value."""
    return isinstance(value, str) and bool(_SECRET_VALUE.match(value.strip()))


def scrub(obj: Any) -> Any:
    """A copy of ``obj`` with secret-named entries and secret-looking strings removed, at any depth, and
    credentials cut from the URLs in the strings kept (``redact_urls``)."""
    if isinstance(obj, Mapping):
        return {k: scrub(v) for k, v in obj.items()
                if not is_secret_key(str(k)) and not looks_like_secret_value(v)}
    if isinstance(obj, (list, tuple)):
        return [scrub(v) for v in obj if not looks_like_secret_value(v)]
    if isinstance(obj, str):
        return redact_urls(obj)
    return obj


def _redact_pairs(text: str) -> str:
    """``k=v&…`` with the value of each secret-named parameter (or secret-looking value) replaced."""
    out = []
    for piece in text.split("&"):
        name, eq, value = piece.partition("=")
        plain_name, plain_value = unquote_plus(name), unquote_plus(value)
        if eq and (is_secret_key(plain_name) or plain_name.lower() in _SECRET_QUERY_NAMES
                   or looks_like_secret_value(plain_value)):
            piece = f"{name}={REDACTED}"
        elif not eq and looks_like_secret_value(plain_name):
            piece = REDACTED
        out.append(piece)
    return "&".join(out)


def _redact_url(url: str) -> str:
    """One URL without credentials; the URL itself, character for character, when it holds none."""
    try:
        parts = urlsplit(url)
    except ValueError:  # malformed (e.g. an unclosed IPv6 bracket): keep only what surely holds no credential
        return url.split("://", 1)[0] + "://" + REDACTED if "@" in url or "?" in url else url
    netloc = parts.netloc.rsplit("@", 1)[1] if "@" in parts.netloc else parts.netloc
    query, fragment = _redact_pairs(parts.query), _redact_pairs(parts.fragment)
    if (netloc, query, fragment) == (parts.netloc, parts.query, parts.fragment):
        return url
    return (f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
            + (f"#{fragment}" if fragment else ""))


def redact_urls(text: str) -> str:
    """``text`` with credentials cut from every URL in it: ``user:password@`` dropped, and the value of each
    query parameter that names a credential (``key``, ``api-key``, ``token``, ``sig``…) or looks like one
    replaced by ``REDACTED``. Text without a URL comes back unchanged (the same object)."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda m: _redact_url(m.group(0)), text)


def public_endpoint(url: str | None) -> str | None:
    """An endpoint URL without credentials: user:password@, query string and fragment dropped
    (some gateways take ``?api-key=…``); scheme and host lower-cased, trailing slash removed."""
    if not url:
        return None
    parts = urlsplit(str(url).strip())
    host = (parts.hostname or "").lower()
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme.lower(), host, parts.path.rstrip("/"), "", "")) or None


def _secret_env_values() -> list[str]:
    """Values of secret-named environment variables (OPENAI_API_KEY, HF_TOKEN, …) long enough to be keys."""
    return [v for k, v in os.environ.items() if len(v) >= 8 and is_secret_key(k)]


def redact_text(text: str, known: Iterable[str] = ()) -> str:
    """``text`` (an error message, a log line) with every credential in it replaced by ``REDACTED``: the values in
    ``known`` and those of secret-named environment variables, provider-key-shaped tokens (``sk-…``, ``hf_…``),
    the token after ``Bearer``/``Basic``, and URL credentials (``redact_urls``). For a server's error that quotes
    back the key it was sent."""
    for value in sorted({v for v in (*known, *_secret_env_values()) if v and len(v) >= 8}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    text = _SECRET_TOKEN.sub(_redacted_token, text)
    return redact_urls(text)


def _redacted_token(m: re.Match) -> str:
    scheme = re.match(r"(?i)(?:Bearer|Basic)\s+", m.group(0))
    return (scheme.group(0) if scheme else "") + REDACTED
