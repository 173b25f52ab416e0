"""One self-contained HTML page (Jinja2; figures embedded as data URIs; no network needed to view it)."""

from __future__ import annotations

import base64
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup


def _markdown() -> Any:
    from markdown_it import MarkdownIt

    # raw HTML in a stage's markdown is shown as text, never run; no images (model-written text could make the
    # page fetch a remote address when opened)
    return MarkdownIt("commonmark", {"html": False}).enable("table").disable("image")


def _blocks(blocks: list[tuple], md: Any) -> list[dict[str, Any]]:
    out = []
    for b in blocks:
        if b[0] == "md":
            out.append({"kind": "md", "html": Markup(md.render(b[1]))})
        elif b[0] == "html":
            out.append({"kind": "html", "html": Markup(b[1])})
        elif b[0] == "img":
            out.append({"kind": "img", "caption": b[1], "data": base64.b64encode(b[2]).decode("ascii")})
        elif b[0] == "details":
            out.append({"kind": "details", "caption": b[1], "html": Markup(b[2])})
    return out


def render_blocks(blocks: list[tuple]) -> str:
    """``blocks`` (as in a section) as one HTML fragment: for content that lives outside the page."""
    env = _environment()
    return env.get_template("blocks.html.j2").render(blocks=_blocks(blocks, _markdown()))


def _environment() -> Environment:
    return Environment(loader=PackageLoader("rubriclab.report", "templates"), autoescape=select_autoescape(["j2"]))


def render_report(sections: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """``sections``: dicts with id, kind, title, run_name, blocks (("md", text) | ("html", html) |
    ("img", caption, png bytes) | ("details", caption, html)); ``meta``: the header's fields."""
    md = _markdown()
    rendered = [{**s, "blocks": _blocks(s["blocks"], md)} for s in sections]
    return _environment().get_template("report.html.j2").render(sections=rendered, **meta)
