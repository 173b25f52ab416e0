"""The report is offline and whole (issue 26): model-written stage text (a repair's diff.md) cannot make the page
load or point to a remote address, a Content-Security-Policy forbids every load but the page's own (its hashed
inline script and stylesheet, ``build.js`` beside it, ``data:`` images), the only addresses it points to are the
MLflow run links, and the audit card's ``injection.png`` is embedded like every other figure. Checked on the HTML
and, where Debian's headless Chromium is installed, in the real browser opening the page from disk."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import zlib
from html.parser import HTMLParser

import pytest

from rubriclab.report import build_report
from rubriclab.report._build import DOCS_DEFAULT_BASE as DOCS
from rubriclab.report._build import DOCS_PAGES
from rubriclab.tracking import stage_run, tracking_uri

UI = "http://ui.example:5000"
CARD = {"settings": {"confidence": 0.95}, "card": {"mine": {
    "app_in": {"value": 0.8, "low": 0.7, "high": 0.9, "n": 5}, "app_out": {"value": 0.6, "low": 0.5, "high": 0.7, "n": 5},
    "alpha": {"value": 0.4, "low": 0.2, "high": 0.6, "n": 5}, "vfr": {"value": 0.1, "low": 0.0, "high": 0.2, "n": 3}}}}

# what a refiner model could write into a criterion that a repair's diff.md then carries
HOSTILE = """## Criteria

| criterion | before | after |
|---|---|---|
| c1 | old ![cell](http://evil.example/cell.png) | new [cell link](https://evil.example/cell) |

![pixel](http://evil.example/pixel.png)

![pixel2](https://evil.example/pixel2.png "title")

See [the docs](https://evil.example/docs) or <https://evil.example/autolink> or www.evil.example/linkify.

<img src="http://evil.example/raw.png"> <a href="http://evil.example/raw">raw</a>
<link rel="stylesheet" href="http://evil.example/s.css"><style>@import url(http://evil.example/i.css);</style>

![ref image][r]

[r]: http://evil.example/ref.png

![escape](../../../../outside.png)

![gone](gone.png)
"""


def _png(width: int = 3, height: int = 2) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


INJECTION_PNG = _png(4, 3)


def _outputs(root):
    audit = root / "outputs/audit/ds"
    audit.mkdir(parents=True)
    (audit / "card.md").write_text("# Audit card: ds\n\n## Injection sensitivity (adversarial axis)\n\nrates here\n\n"
                                   "![Injection sensitivity per source](injection.png)\n\nafter the figure\n")
    (audit / "injection.png").write_bytes(INJECTION_PNG)
    (audit / "card.json").write_text(json.dumps(CARD))
    (audit / "mine.reliability.per_criterion.csv").write_text("criterion,alpha\nc1,0.4\n")
    (root / "outputs/outside.png").write_bytes(_png())  # a PNG outside the stage's folder: never embedded
    repair = root / "outputs/repair/ds"
    (repair / "mine").mkdir(parents=True)
    (repair / "summary.md").write_text("# Repair: ds\n\nsummary <script>alert(1)</script>\n")
    (repair / "mine" / "diff.md").write_text("# diff\n\n" + HOSTILE)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("offline_report")
    mp = pytest.MonkeyPatch()
    mp.delenv("MLFLOW_TRACKING_URI", raising=False)
    try:
        _outputs(root)
        with stage_run("audit", "audit@ds", {}, root, tags={"models": "scripted/judge"}) as run:
            run_id = run.run_id
        res = build_report(root, root / "outputs/report", tracking_uri=tracking_uri(root), experiment="rubriclab",
                           ledger_rows=[{"stage": "audit@ds", "role": "judge", "items": 1, "calls": 1}],
                           store="calls.sqlite", ui_url=UI)
    finally:
        mp.undo()
    text = res["build_path"].read_text()
    build = json.loads(text.split("=", 1)[1].rstrip().rstrip(";"))
    return {"res": res, "html": res["path"].read_text(), "build": build, "run_id": run_id}


class _Refs(HTMLParser):
    """Every attribute of the page that names an address, and the inline scripts, styles and CSP."""

    URL_ATTRS = {"src", "href", "srcset", "poster", "data", "action", "formaction", "background", "cite",
                 "longdesc", "manifest", "ping", "xlink:href", "codebase", "archive", "icon"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.refs: list[tuple[str, str, str]] = []
        self.styles_attrs: list[str] = []
        self.csp: list[str] = []
        self.inline: dict[str, list[str]] = {"script": [], "style": []}
        self._open: str | None = None
        self._src = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.refs += [(tag, k, v or "") for k, v in attrs if k in self.URL_ATTRS]
        if "style" in a:
            self.styles_attrs.append(tag)
        if tag == "meta" and (a.get("http-equiv") or "").lower() == "content-security-policy":
            self.csp.append(a.get("content") or "")
        if tag in ("script", "style"):
            self._open, self._src = tag, "src" in a
            if not self._src:
                self.inline[tag].append("")

    def handle_data(self, data):
        if self._open and not self._src:
            self.inline[self._open][-1] += data

    def handle_endtag(self, tag):
        if tag == self._open:
            self._open = None


def _parse(html: str) -> _Refs:
    p = _Refs()
    p.feed(html)
    p.close()
    return p


def _policy(csp: str) -> dict[str, list[str]]:
    return {d.split()[0]: d.split()[1:] for d in (x.strip() for x in csp.split(";")) if d}


def test_no_src_or_href_leaves_the_page_but_the_mlflow_links(report):
    page = _parse(report["html"])
    for tag, attr, value in page.refs:
        if attr == "src":
            assert tag == "img" and value.startswith("data:image/png;base64,") or (tag, value) == ("script", "build.js")
        else:  # in-page anchors, and the "docs" links into the documentation site (navigation, relative: no load)
            assert attr == "href" and tag == "a" and (value.startswith("#") or value.startswith(DOCS + "/")), (
                tag, attr, value)
    fragments = _parse("".join(report["build"]["html"].values()))  # HTML the page takes from build.js
    assert fragments.refs == []
    links = [r["link"] for r in report["build"]["runs"].values() if r]
    assert links and all(link.startswith(UI + "/#/experiments/") for link in links)
    assert report["run_id"] in "".join(links)
    # the hostile text is shown as text, never as an element that loads or links
    assert "evil.example" in report["html"]
    assert not re.search(r"<(?:img|a|link|style|script)\b[^>]*evil\.example", report["html"])
    assert "@import url(http://evil.example/i.css)" not in "".join(page.inline["style"])


def test_a_content_security_policy_forbids_every_remote_load(report):
    page = _parse(report["html"])
    assert len(page.csp) == 1
    assert report["html"].index("Content-Security-Policy") < report["html"].index("<style")  # before what it governs
    policy = _policy(page.csp[0])
    assert policy["default-src"] == ["'none'"]  # fonts, frames, connections, media, objects, workers: nothing
    assert policy["img-src"] == ["data:"]
    assert policy["base-uri"] == ["'none'"] and policy["form-action"] == ["'none'"]
    for directive, sources in policy.items():
        for s in sources:
            assert s in ("'none'", "'self'", "file:", "data:") or re.fullmatch(r"'sha256-[A-Za-z0-9+/]+=*'", s), (
                directive, s)
    assert not any("http" in s or "*" in s or "unsafe" in s for v in policy.values() for s in v)
    # the page's own inline script and stylesheet are allowed by their hashes, and nothing else inline
    digest = {k: ["'sha256-" + base64.b64encode(hashlib.sha256(t.encode()).digest()).decode() + "'" for t in v]
              for k, v in page.inline.items()}
    assert len(page.inline["script"]) == 1 and len(page.inline["style"]) == 1
    assert [s for s in policy["script-src"] if s.startswith("'sha256-")] == digest["script"]
    assert [s for s in policy["style-src"] if s.startswith("'sha256-")] == digest["style"]
    # a style attribute would need 'unsafe-inline': pandas' tables lose theirs (the stylesheet has the rule)
    assert page.styles_attrs == []
    assert _parse("".join(report["build"]["html"].values())).styles_attrs == []


def test_the_audit_cards_injection_figure_is_embedded(report):
    html = report["html"]
    audit = html.split('id="audit-ds"')[1].split("</section>")[0]
    assert 'src="injection.png"' not in html and 'href="injection.png"' not in html
    figure = re.search(r'<img src="data:image/png;base64,([^"]+)" alt="Injection sensitivity per source">', audit)
    assert figure and base64.b64decode(figure.group(1)) == INJECTION_PNG
    assert audit.index("rates here") < audit.index("Injection sensitivity per source\">") < audit.index("after the")
    # the repair diff's local references: a missing file and a path outside the folder are never embedded
    assert "<code>gone.png</code>" in html and "../../../../outside.png" in html
    assert html.count("<img") == 3  # the two card scatter plots and the injection figure, nothing else


def test_the_page_opens_offline_in_a_real_browser_and_loads_nothing_remote(report):
    from rubriclab.testing import BrowserNotFoundError, browser, find_browser, wait_for_text

    try:
        find_browser()
    except BrowserNotFoundError as exc:
        pytest.skip(str(exc))
    with browser() as driver:
        driver.get(report["res"]["path"].as_uri())
        wait_for_text(driver, "Call ledger")
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors  # no refused load, no refused inline script or style
        assert driver.find_elements("id", "build-missing") == []  # build.js beside the page ran (file: allowed)
        assert report["run_id"] in driver.find_element("id", "audit-ds").text
        font = driver.execute_script("return getComputedStyle(document.body).fontFamily")
        assert "system-ui" in font  # the hashed stylesheet applies
        images = driver.find_elements("tag name", "img")
        assert len(images) == 3 and all(
            driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", i) for i in images)
        refs = driver.execute_script(
            "return [...document.querySelectorAll('[src],[href]')].map(e => e.getAttribute('src') || "
            "e.getAttribute('href'))")
        outside = [r for r in refs if not r.startswith(("#", "data:image/png;base64,")) and r != "build.js"]
        docs = [r for r in outside if r.startswith(report["build"]["docs_base"] + "/")]  # build.js's docs base
        assert docs and all(r.removeprefix(report["build"]["docs_base"] + "/") in DOCS_PAGES.values() for r in docs)
        outside = [r for r in outside if r not in docs]
        assert outside and all(r.startswith(UI + "/#/experiments/") for r in outside), outside  # MLflow links only
        loaded = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        assert all(u.startswith(("file:", "data:")) for u in loaded), loaded
        # and the policy is live: a remote image added now is refused
        verdict = driver.execute_async_script("""
            var done = arguments[arguments.length - 1];
            document.addEventListener('securitypolicyviolation', function (e) {
              done(e.effectiveDirective + ' ' + e.blockedURI); });
            var img = new Image(); img.src = 'http://127.0.0.1:9/probe.png'; document.body.appendChild(img);
            setTimeout(function () { done('loaded without a violation'); }, 5000);""")
        assert verdict == "img-src http://127.0.0.1:9/probe.png"
