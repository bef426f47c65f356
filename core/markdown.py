"""Safe Markdown rendering for study instructions (Markdown, then an allow-list sanitiser)."""

from __future__ import annotations

from functools import lru_cache

import markdown as md
import nh3
from django.utils.safestring import SafeString, mark_safe

_TAGS = {
    "p", "br", "hr", "strong", "em", "b", "i", "u", "code", "pre", "blockquote", "ul", "ol",
    "li", "h1", "h2", "h3", "h4", "h5", "h6", "a", "img", "table", "thead", "tbody", "tr", "th",
    "td",
}  # fmt: skip
_ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}}


@lru_cache(maxsize=64)
def render_markdown(text: str) -> SafeString:
    """Render Markdown to HTML that is safe to embed: scripts, handlers and styles are removed.

    Kept for the last 64 texts: the annotator's page renders the same instructions with every
    answer (0.45 ms each)."""
    html = md.markdown(text or "", extensions=["tables", "fenced_code", "sane_lists"])
    return mark_safe(  # nh3 has sanitised the HTML
        nh3.clean(html, tags=_TAGS, attributes=_ATTRIBUTES, url_schemes={"http", "https", "mailto"})
    )
