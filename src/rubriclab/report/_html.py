"""One self-contained HTML page (Jinja2; figures embedded as data URIs; no network needed to view it).

The page loads nothing from anywhere but itself and ``build.js`` beside it: a Content-Security-Policy meta tag
forbids every other load (scripts, styles, images but ``data:`` ones, fonts, frames, connections), the page's
own inline script and stylesheet are allowed by their hashes, and stage text is rendered without images, links
or raw HTML (model-written criteria could otherwise make the page fetch a remote address when opened). The only
addresses the page points to are the MLflow run links ``build.js`` fills in (navigation, not loads)."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

# style attributes of generated HTML (pandas' ``<tr style="text-align: right;">``): the stylesheet has the rule
_STYLE_ATTR = re.compile(r'(<[A-Za-z][^<>]*?)\s+style="[^"<>]*"')


def _markdown() -> Any:
    from markdown_it import MarkdownIt

    # raw HTML in a stage's markdown is shown as text, never run; no images and no links (model-written text
    # could make the page fetch, or point to, a remote address); a stage's own figures are embedded by _collect
    return MarkdownIt("commonmark", {"html": False}).enable("table").disable(["image", "link", "autolink"])


def _no_style(html: str) -> str:
    return _STYLE_ATTR.sub(r"\1", html)


def _blocks(blocks: list[tuple], md: Any) -> list[dict[str, Any]]:
    out = []
    for b in blocks:
        if b[0] == "md":
            out.append({"kind": "md", "html": Markup(md.render(b[1]))})
        elif b[0] == "html":
            out.append({"kind": "html", "html": Markup(_no_style(b[1]))})
        elif b[0] == "img":
            out.append({"kind": "img", "caption": b[1], "data": base64.b64encode(b[2]).decode("ascii")})
        elif b[0] == "details":
            out.append({"kind": "details", "caption": b[1], "html": Markup(_no_style(b[2]))})
    return out


def render_blocks(blocks: list[tuple]) -> str:
    """``blocks`` (as in a section) as one HTML fragment: for content that lives outside the page."""
    env = _environment()
    return env.get_template("blocks.html.j2").render(blocks=_blocks(blocks, _markdown()))


def _environment() -> Environment:
    return Environment(loader=PackageLoader("rubriclab.report", "templates"), autoescape=select_autoescape(["j2"]))


def _source(env: Environment, name: str) -> str:
    assert env.loader is not None
    return env.loader.get_source(env, name)[0]


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def content_security_policy(script: str, css: str) -> str:
    """The page's policy: nothing loads but ``build.js`` beside it (``'self'`` when served, ``file:`` when opened
    from disk), the inline ``script`` and ``css`` (by hash) and ``data:`` images."""
    return (f"default-src 'none'; script-src 'self' file: {_sha256(script)}; style-src {_sha256(css)}; "
            "img-src data:; base-uri 'none'; form-action 'none'")


def render_report(sections: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """``sections``: dicts with id, kind, title, run_name, blocks (("md", text) | ("html", html) |
    ("img", caption, png bytes) | ("details", caption, html)); ``meta``: the header's fields."""
    md = _markdown()
    rendered = [{**s, "blocks": _blocks(s["blocks"], md)} for s in sections]
    env = _environment()
    script, css = _source(env, "report.js.j2"), _source(env, "report.css.j2")
    return env.get_template("report.html.j2").render(
        sections=rendered, script=Markup(script), css=Markup(css), csp=content_security_policy(script, css), **meta)
