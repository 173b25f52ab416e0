"""One self-contained HTML page (Jinja2; figures embedded as data URIs; no network needed to view it)."""

from __future__ import annotations

import base64
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup


def _markdown() -> Any:
    from markdown_it import MarkdownIt

    # raw HTML in a stage's markdown is shown as text, never run
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def render_report(sections: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """``sections``: dicts with id, kind, title, run, link, blocks (("md", text) | ("html", html) |
    ("img", caption, png bytes) | ("details", caption, html)); ``meta``: the header's fields."""
    md = _markdown()
    env = Environment(loader=PackageLoader("rubriclab.report", "templates"), autoescape=select_autoescape(["j2"]))
    rendered = []
    for s in sections:
        blocks = []
        for b in s["blocks"]:
            if b[0] == "md":
                blocks.append({"kind": "md", "html": Markup(md.render(b[1]))})
            elif b[0] == "html":
                blocks.append({"kind": "html", "html": Markup(b[1])})
            elif b[0] == "img":
                blocks.append({"kind": "img", "caption": b[1], "data": base64.b64encode(b[2]).decode("ascii")})
            elif b[0] == "details":
                blocks.append({"kind": "details", "caption": b[1], "html": Markup(b[2])})
        rendered.append({**s, "blocks": blocks})
    return env.get_template("report.html.j2").render(sections=rendered, **meta)
