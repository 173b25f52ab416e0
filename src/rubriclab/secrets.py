"""The one secret filter: what counts as a credential, for the call store, MLflow params and logs.

A key names a credential when any component of its (dotted) path contains ``api_key``, ``secret``,
``password``, ``credential`` or ``authorization``, or has ``key``/``token``/``auth``/``cookie`` as a
word (``apiKey``, ``hf_token``, ``X-Api-Key``). ``max_tokens`` (plural, a decoding knob) is not one.
A value shaped like a provider key (``sk-…``, ``hf_…``) or an auth header (``Bearer …``) is one
whatever its name. A URL keeps no credentials: ``user:password@`` and secret query parameters
(``?key=…``, ``?api-key=…``, ``?sig=…``) are cut wherever a URL appears in a logged value (``redact_urls``).

Names alone cannot decide what a request field holds (``passphrase``, ``sessionid``, ``X-Jwt-Assertion``,
``hmac``, ``access_code`` name no "key"), so a role's ``extra`` fields are kept by **allow-list**
(``split_extra``): the documented decoding parameters (``PUBLIC_PARAMS``: litellm's OpenAI chat parameters that
shape a reply, and the sampling parameters of vLLM-style servers, top level or in ``extra_body``) are stored,
keyed and logged; every other value is sent and nothing else: the call store keeps its name, and the cache key
a salted, slow hash of the body values (``sealed_digest``), never headers or credentials (``TRANSPORT_PARAMS``).
In params.yaml (copied into dvc.lock, hence git) such a value must be an environment reference
``os.environ/NAME``, resolved at call time (``literal_credential``).

Names and shapes cannot catch a key kept under a plain name (``api_key_env: ZZQ_PROBE_A``), so credentials are also
redacted **by value**: every value the gateway resolves for a role's credentials (the key read through
``api_key_env``, the private ``extra`` values, an endpoint URL's user, password and query values) is registered
(``register_secret``) the moment it is read, and ``redact_text`` — the one filter for store rows, retry events,
error texts, log records and uncaught tracebacks (``install_output_filters``) — replaces each registered value in
the forms a server or a client writes it (as is, URL-encoded, JSON-escaped, in a Basic header; any case).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote, unquote_plus, urlsplit, urlunsplit

__all__ = ["ENV_REF", "NOT_LOGGED", "PUBLIC_PARAMS", "REDACTED", "TRANSPORT_PARAMS", "install_output_filters",
           "is_env_ref", "is_secret_key", "literal_credential", "logged_extra", "looks_like_secret_value",
           "merge_params", "public_endpoint", "redact_known", "redact_text", "redact_urls", "register_secret",
           "register_url_credentials", "resolve_env", "scrub", "sealed_digest", "split_extra", "unstored_names",
           "url_credential"]

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


# variables whose names read as secret-named (``pwd``, ``auth``) but that hold the shell's paths
_NOT_SECRET_ENV = frozenset({"PWD", "OLDPWD", "SSH_AUTH_SOCK"})


def _secret_env_values() -> list[str]:
    """Values of secret-named environment variables (OPENAI_API_KEY, HF_TOKEN, …) long enough to be keys."""
    return [v for k, v in os.environ.items() if len(v) >= 8 and k not in _NOT_SECRET_ENV and is_secret_key(k)]


def redact_text(text: str, known: Iterable[str] = ()) -> str:
    """``text`` (an error message, a log line) with every credential in it replaced by ``REDACTED``: the registered
    values (``register_secret``), the values in ``known`` and those of secret-named environment variables,
    provider-key-shaped tokens (``sk-…``, ``hf_…``), the token after ``Bearer``/``Basic``, and URL credentials
    (``redact_urls``). For a server's error that quotes back the key it was sent."""
    text = redact_known(text)
    for value in sorted({v for v in (*known, *_secret_env_values()) if v and len(v) >= 8}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    text = _SECRET_TOKEN.sub(_redacted_token, text)
    return redact_urls(text)


def _redacted_token(m: re.Match) -> str:
    scheme = re.match(r"(?i)(?:Bearer|Basic)\s+", m.group(0))
    return (scheme.group(0) if scheme else "") + REDACTED


# -- credentials by value ------------------------------------------------------------------------------------------

# shorter values are not registered: replacing every 4-letter word that happens to equal a header value would
# garble texts, and no provider's credential is that short
MIN_SECRET_LEN = 6
_REGISTERED: set[str] = set()
_REGISTERED_RE: re.Pattern | None = None
_REGISTER_LOCK = threading.Lock()


def _forms(value: str) -> set[str]:
    """The ways a value shows up in a text: as is, URL-encoded (a quoted query string), JSON-escaped (a quoted body)."""
    out = {value, quote(value, safe=""), quote_plus(value), json.dumps(value)[1:-1], unquote(value)}
    return {f for f in out if len(f) >= MIN_SECRET_LEN}


def register_secret(*values: Any) -> None:
    """Count each string in ``values`` (``MIN_SECRET_LEN`` characters or more) as a credential: from now on
    ``redact_text``/``redact_known`` replace it, in any case, wherever it appears in this process's texts."""
    global _REGISTERED_RE
    new: set[str] = set()
    for value in values:
        if isinstance(value, str) and len(value.strip()) >= MIN_SECRET_LEN and value not in _REGISTERED:
            new |= _forms(value)
    if not new:
        return
    with _REGISTER_LOCK:
        if new <= _REGISTERED:
            return
        _REGISTERED.update(new)
        _REGISTERED_RE = re.compile("|".join(re.escape(v) for v in sorted(_REGISTERED, key=len, reverse=True)),
                                    re.IGNORECASE)
    install_output_filters()


def register_url_credentials(url: str | None) -> None:
    """Register what a URL carries as credentials: its user and password (and the Basic header an HTTP client
    builds from them) and every query and fragment value."""
    if not url or "://" not in str(url):
        return
    try:
        parts = urlsplit(str(url).strip())
    except ValueError:
        return
    values: list[str] = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        user, _, password = userinfo.partition(":")
        values += [userinfo, unquote(user), unquote(password)]
        values.append(base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode())
    for chunk in (parts.query, parts.fragment):
        values += [v for _, v in parse_qsl(chunk, keep_blank_values=True)]
    register_secret(*values)


def redact_known(text: str) -> str:
    """``text`` with every registered credential (``register_secret``) replaced by ``REDACTED``; the text itself
    when there is none in it."""
    pattern = _REGISTERED_RE
    if pattern is None or not text or not isinstance(text, str):
        return text
    return pattern.sub(REDACTED, text)


class _RedactingRecordFactory:
    """A logging record factory whose records carry their message already formatted and redacted: every log line
    of the process, whichever logger and handler writes it, goes through ``redact_text``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self.inner(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed log call: leave it for logging to report
            return record
        record.msg, record.args = redact_text(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        return record


_FILTERS_INSTALLED = False
_FILTERS_LOCK = threading.Lock()


def install_output_filters() -> None:
    """Send every log record and every uncaught exception's traceback of this process through ``redact_text``
    (once; done on the first ``register_secret``)."""
    global _FILTERS_INSTALLED
    with _FILTERS_LOCK:
        if _FILTERS_INSTALLED:
            return
        _FILTERS_INSTALLED = True
    logging.setLogRecordFactory(_RedactingRecordFactory(logging.getLogRecordFactory()))

    def hook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        import traceback

        sys.stderr.write(redact_text("".join(traceback.format_exception(kind, exc, tb))))

    sys.excepthook = hook


# -- the allow-list of request fields ------------------------------------------------------------------------------

# litellm's OpenAI chat-completion parameters (``litellm.OPENAI_CHAT_COMPLETION_PARAMS``) that shape a reply; left
# out: transport and identity (api_key, api_base, base_url, api_version, organization, deployment_id, headers,
# timeouts, retries, user, safety_identifier, prompt_cache_key, store, service_tier, stream). A test keeps this a
# subset of litellm's list: a name litellm adds is not allowed until someone decides it defines a reply.
OPENAI_REPLY_PARAMS = frozenset({
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "n", "stop", "seed", "response_format",
    "logprobs", "top_logprobs", "logit_bias", "presence_penalty", "frequency_penalty", "tools", "tool_choice",
    "parallel_tool_calls", "functions", "function_call", "reasoning_effort", "verbosity", "thinking", "modalities",
    "audio", "prediction", "web_search_options",
})
# sampling and decoding parameters of self-hosted OpenAI-compatible servers (vLLM's "extra parameters", also read by
# SGLang, llama.cpp and TGI), given at the top level of ``extra`` or inside ``extra_body``
SERVER_SAMPLING_PARAMS = frozenset({
    "top_k", "min_p", "typical_p", "repetition_penalty", "length_penalty", "min_tokens", "best_of", "use_beam_search",
    "stop_token_ids", "ignore_eos", "include_stop_str_in_output", "skip_special_tokens",
    "spaces_between_special_tokens", "truncate_prompt_tokens", "bad_words", "allowed_token_ids", "prompt_logprobs",
    "guided_json", "guided_regex", "guided_choice", "guided_grammar", "guided_decoding_backend",
    "guided_whitespace_pattern", "structured_outputs", "chat_template_kwargs", "add_generation_prompt",
    "continue_final_message", "echo",
})
PUBLIC_PARAMS = OPENAI_REPLY_PARAMS | SERVER_SAMPLING_PARAMS
# who is asking and how to reach the model: sent, never stored, never keyed (a rotated key or token keeps the cache)
TRANSPORT_PARAMS = frozenset({
    "api_key", "api_base", "base_url", "api_version", "organization", "timeout", "request_timeout", "num_retries",
    "max_retries", "extra_headers", "headers", "default_headers",
    "aws_access_key_id", "aws_secret_access_key", "aws_session_token", "aws_session_name", "aws_profile_name",
    "aws_role_name", "aws_web_identity_token", "aws_region_name", "vertex_credentials", "vertex_project",
    "vertex_location", "azure_ad_token", "azure_username", "azure_password", "client_id", "client_secret",
    "tenant_id",
})
BODY = "extra_body"
ENV_REF = "os.environ/"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NOT_LOGGED = "(sent, not logged)"


def is_env_ref(value: Any) -> bool:
    """True for ``os.environ/NAME`` (litellm's spelling of a reference to an environment variable)."""
    return isinstance(value, str) and value.startswith(ENV_REF) and bool(_ENV_NAME.fullmatch(value[len(ENV_REF):]))


def split_extra(extra: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(public, private)`` parts of a role's ``extra``: public holds the allow-listed decoding parameters (top
    level and inside ``extra_body``), private everything else, in the same nesting. Only public is ever stored,
    keyed in clear or logged; both are sent."""
    public: dict[str, Any] = {}
    private: dict[str, Any] = {}
    for name, value in (extra or {}).items():
        if name == BODY and isinstance(value, Mapping):
            body_public = {k: v for k, v in value.items() if k in PUBLIC_PARAMS}
            body_private = {k: v for k, v in value.items() if k not in PUBLIC_PARAMS}
            if body_public:
                public[BODY] = body_public
            if body_private:
                private[BODY] = body_private
        elif name in PUBLIC_PARAMS:
            public[name] = value
        else:
            private[name] = value
    return public, private


def public_request_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The allow-listed part of request params (what may be keyed in clear, stored and logged)."""
    return split_extra(params)[0]


def merge_params(*parts: Mapping[str, Any]) -> dict[str, Any]:
    """Request kwargs from several parts, later parts winning; mappings (``extra_body``, ``extra_headers``) merged
    one level deep so a public and a private half of ``extra_body`` are sent as one body."""
    out: dict[str, Any] = {}
    for part in parts:
        for k, v in part.items():
            if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
                out[k] = {**out[k], **v}
            else:
                out[k] = v
    return out


def _leaves(obj: Any, path: str) -> Iterable[tuple[str, Any]]:
    if isinstance(obj, Mapping) and obj:
        for k, v in obj.items():
            yield from _leaves(v, f"{path}.{k}" if path else str(k))
    else:
        yield path, obj


def unstored_names(private: Mapping[str, Any]) -> list[str]:
    """Dotted names of the private fields (``extra_body.passphrase``): all the call store keeps of them."""
    return sorted(path for path, _ in _leaves(private, ""))


def resolve_env(obj: Any, where: str = "extra", register: bool = True) -> Any:
    """``obj`` with every ``os.environ/NAME`` replaced by that variable's value, at any depth, each value registered
    as a credential (``register_secret``) unless ``register`` is False (an endpoint URL: only its credential parts
    are, ``register_url_credentials``). A variable that is not set is a ConfigError naming the field and the
    variable (never a value)."""
    if isinstance(obj, Mapping):
        return {k: resolve_env(v, f"{where}.{k}", register) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [resolve_env(v, f"{where}[{i}]", register) for i, v in enumerate(obj)]
    if is_env_ref(obj):
        name = obj[len(ENV_REF):]
        value = os.environ.get(name)
        if value is None:
            from rubriclab.errors import ConfigError

            raise ConfigError(f"{where}: environment variable {name} is not set (referenced as {ENV_REF}{name}); "
                              f"export it before running")
        if register:
            register_secret(value)
        return value
    return obj


def keyed_private(private: Mapping[str, Any]) -> dict[str, Any]:
    """The private fields that a reply may depend on (body fields), i.e. what the key changes with: all but the
    transport fields (credentials, headers, endpoints, timeouts)."""
    return {k: v for k, v in private.items() if k not in TRANSPORT_PARAMS}


_DIGESTS: dict[tuple[bytes, str], str] = {}
_DIGESTS_LOCK = threading.Lock()


def sealed_digest(values: Mapping[str, Any], salt: bytes) -> str | None:
    """A salted, deliberately slow hash (scrypt) of private request values, for a cache key that must change with
    them without holding them: the salt is per call store, and each guess at a value costs a scrypt. None when
    there are no values. Cached per (salt, values) in this process."""
    if not values:
        return None
    blob = json.dumps(values, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    with _DIGESTS_LOCK:
        hit = _DIGESTS.get((salt, blob))
    if hit is not None:
        return hit
    try:
        raw = hashlib.scrypt(blob.encode("utf-8"), salt=b"rubriclab-sealed\0" + salt, n=2**14, r=8, p=1, dklen=32)
    except (AttributeError, ValueError):  # an OpenSSL without scrypt
        raw = hashlib.pbkdf2_hmac("sha256", blob.encode("utf-8"), b"rubriclab-sealed\0" + salt, 300_000)
    digest = raw.hex()
    with _DIGESTS_LOCK:
        _DIGESTS[(salt, blob)] = digest
    return digest


def secret_strings(private: Mapping[str, Any]) -> list[str]:
    """Every string among the (resolved) private values: what an error text must not repeat."""
    return [v for _, v in _leaves(private, "") if isinstance(v, str) and v]


def logged_extra(extra: Mapping[str, Any]) -> dict[str, Any]:
    """A role's ``extra`` as it may be logged: allow-listed values as they are, every other value replaced by
    its environment reference (``os.environ/NAME``, a name) or ``NOT_LOGGED``."""
    public, private = split_extra(extra)

    def mask(obj: Any) -> Any:
        if isinstance(obj, Mapping) and obj:
            return {k: mask(v) for k, v in obj.items()}
        return obj if is_env_ref(obj) else NOT_LOGGED

    return merge_params(public, mask(private))


_ROLE_EXTRA = re.compile(r"^llm\.(?:defaults|roles\.[^.]+)\.extra$")


def is_role_extra_path(path: str) -> bool:
    """True for the dotted params path of a role's ``extra`` (``llm.roles.judge.extra``, ``llm.defaults.extra``)."""
    return bool(_ROLE_EXTRA.match(path))


_HOW = ("write `{path}: {ref}NAME` and export NAME: the value is read from the environment at call time and "
        "never stored, logged or written to dvc.lock")


def literal_credential(params: Mapping[str, Any]) -> str | None:
    """The first literal credential in params (which dvc.lock copies into git), as one line that names the field
    (never its value) and says how to reference an environment variable instead; None when there is none.

    Refused: under a role's ``extra``, any value outside the allow-list (``PUBLIC_PARAMS``) that is not an
    ``os.environ/NAME`` reference — strings and numbers alike (an access code may be all digits); true, false and
    null are allowed (no credential fits in a bit); an ``api_base`` with ``user:password@``, a query or a
    fragment; an ``api_key_env`` that is not a variable name; a password in any URL anywhere in params."""
    llm = params.get("llm") if isinstance(params.get("llm"), Mapping) else {}
    sections: list[tuple[str, Any]] = [("llm.defaults", llm.get("defaults"))]
    roles = llm.get("roles") if isinstance(llm.get("roles"), Mapping) else {}
    sections += [(f"llm.roles.{name}", spec) for name, spec in roles.items()]
    for where, spec in sections:
        if not isinstance(spec, Mapping):
            continue
        extra = spec.get("extra")
        if isinstance(extra, Mapping):
            public, private = split_extra(extra)
            for path, value in _items(_leaves(private, f"{where}.extra")):
                if is_env_ref(value) or value is None or isinstance(value, bool) or value == {} or value == []:
                    continue
                if isinstance(value, str) and value.startswith(ENV_REF):
                    return (f"{path}: {value[:len(ENV_REF)]}… is not a variable name (value not shown); "
                            + _HOW.format(path=path, ref=ENV_REF))
                return (f"{path}: a literal value outside the allow-list of decoding parameters (value not shown) "
                        "would be copied into dvc.lock and git; " + _HOW.format(path=path, ref=ENV_REF))
            for path, value in _leaves(public, f"{where}.extra"):
                if is_env_ref(value):
                    return (f"{path}: a documented decoding parameter is keyed and logged in clear, so it takes "
                            f"its value, not an {ENV_REF}NAME reference")
        api_base = spec.get("api_base")
        if isinstance(api_base, str) and not is_env_ref(api_base):
            if api_base.startswith(ENV_REF):
                return (f"{where}.api_base: {ENV_REF}… is not a variable name (value not shown); "
                        + _HOW.format(path=f"{where}.api_base", ref=ENV_REF))
            try:
                parts = urlsplit(api_base.strip())
                netloc = parts.netloc
            except ValueError:
                parts, netloc = None, "@"
            if parts is None or "@" in netloc or parts.query or parts.fragment:
                return (f"{where}.api_base: an endpoint URL with user:password@, a query or a fragment (not shown) "
                        "would be copied into dvc.lock and git; give the key as api_key_env or extra.api_key, or "
                        + _HOW.format(path=f"{where}.api_base", ref=ENV_REF))
        env_name = spec.get("api_key_env")
        if isinstance(env_name, str) and not _ENV_NAME.fullmatch(env_name):
            return (f"{where}.api_key_env: must be the NAME of an environment variable (the value given is not one, "
                    "not shown); the key itself belongs in the environment")
    for path, text in _items(_leaves(params, "")):
        what = url_credential(text) if isinstance(text, str) else None
        if what:
            return f"{path}: {url_credential_advice(what)}"
    return None


def url_credential_advice(what: str) -> str:
    """The one line refusing a URL setting that carries ``what`` (``url_credential``), and what to do instead."""
    return (f"a URL with {what} (not shown) would be copied into dvc.lock and git; leave it out of the URL and give "
            "it through the environment (PostgreSQL: PGPASSWORD or ~/.pgpass; an endpoint's key: api_key_env or "
            f"extra.api_key: {ENV_REF}NAME)")


def _items(leaves: Iterable[tuple[str, Any]]) -> Iterable[tuple[str, Any]]:
    """Leaves with lists opened (``path[i]``), at any depth."""
    for path, value in leaves:
        if isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                yield from _items(_leaves(item, f"{path}[{i}]"))
        else:
            yield path, value


def url_credential(text: str) -> str | None:
    """What credential a URL in ``text`` carries, in words (``a password in user:password@``, ``a credential in
    its query (password=…)``), never the value; None when none does. A query parameter is a credential when its
    name says so (``password``, ``sslpassword``, ``key``, ``token``, ``sig``…) or its value looks like a key."""
    for m in _URL_IN_TEXT.finditer(text):
        try:
            parts = urlsplit(m.group(0))
            netloc = parts.netloc
        except ValueError:
            if "@" in m.group(0) or "?" in m.group(0):
                return "user information or a query that cannot be parsed"
            continue
        if "@" in netloc and ":" in netloc.rsplit("@", 1)[0]:
            return "a password in user:password@"
        for chunk in (parts.query, parts.fragment):
            for name, value in parse_qsl(chunk, keep_blank_values=True):
                if is_secret_key(name) or name.lower() in _SECRET_QUERY_NAMES or looks_like_secret_value(value):
                    return f"a credential in its query ({name}=…)"
    return None
