"""The one secret filter: what counts as a credential, for the call store, MLflow params and logs.

A key names a credential when any component of its (dotted) path contains ``api_key``, ``secret``,
``password``, ``credential`` or ``authorization``, or has ``key``/``token``/``auth``/``cookie`` as a
word (``apiKey``, ``hf_token``, ``X-Api-Key``). ``max_tokens`` (plural, a decoding knob) is not one.
A value shaped like a provider key (``sk-…``, ``hf_…``) or an auth header (``Bearer …``) is one
whatever its name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["is_secret_key", "looks_like_secret_value", "public_endpoint", "scrub"]

_SECRET_WORDS = frozenset({
    "key", "apikey", "token", "secret", "secrets", "password", "passwd", "pwd", "credential", "credentials",
    "auth", "authorization", "cookie", "bearer",
})
_SECRET_SUBSTRINGS = ("api_key", "apikey", "secret", "password", "passwd", "credential", "authorization")
_SECRET_VALUE = re.compile(r"^(?:(?:sk-|sk_|hf_|ghp_|xox[abp]-|AKIA)[A-Za-z0-9_\-]{12,}|(?:Bearer|Basic)\s+\S{8,})$",
                           re.IGNORECASE)


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
    """A copy of ``obj`` with secret-named entries and secret-looking strings removed, at any depth."""
    if isinstance(obj, Mapping):
        return {k: scrub(v) for k, v in obj.items()
                if not is_secret_key(str(k)) and not looks_like_secret_value(v)}
    if isinstance(obj, (list, tuple)):
        return [scrub(v) for v in obj if not looks_like_secret_value(v)]
    return obj


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
