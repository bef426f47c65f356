"""What a dashboard push sends: the fragments that changed since the last push, and a summary.

The websocket consumer (:mod:`analytics.consumers`) renders the dashboard as
:class:`Fragment` s: each card, and inside the annotators card each row, is HTML whose root
carries its ``id``, so htmx's ws extension swaps it in place (out of band). One
:class:`SentFragments` per connection remembers a digest of what it sent and hands back only
the fragments whose digest changed: a submission sends the summary, the rows whose figures
moved and the trends, not every card again. A card whose frame changed (its own text, or the
set or order of its rows) is sent whole.

:func:`announcement` says what changed in words ("3 new answers; 1 new flag") for the page's
``aria-live`` region.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.template.loader import render_to_string

from analytics.models import Flag, QualitySnapshot
from apps.studies.models import Question

TEMPLATE = "analytics/dashboard.html"


@dataclass(frozen=True)
class Fragment:
    """A pushed piece of the dashboard.

    Parameters
    ----------
    key : str
        Names the fragment within its connection (``"annotators"``, ``"row-12"``).
    html : str
        The rendered HTML; its root elements carry the ids htmx swaps by.
    parts : tuple of Fragment
        Fragments rendered inside ``html`` verbatim (the table's rows), sent on their own
        when only they changed. They have no parts of their own.
    """

    key: str
    html: str
    parts: tuple[Fragment, ...] = ()

    def frame(self) -> str:
        """The HTML with each part replaced by its key: what changes when the card itself
        does, or when its parts are added, removed or reordered."""
        text = self.html
        for part in self.parts:
            text = text.replace(part.html, f"\x00{part.key}\x00", 1)
        return text


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


@dataclass
class SentFragments:
    """The digests of the fragments one connection has been sent."""

    digests: dict[str, bytes] = field(default_factory=dict)

    def changed(self, fragments: Iterable[Fragment]) -> tuple[list[str], list[str]]:
        """The HTML to send for ``fragments``, and remember it as sent: the whole fragments,
        and the parts sent on their own.

        A fragment whose frame changed is sent whole; one whose frame did not, only its parts
        that changed (none at all if nothing did). The parts go in a message of their own:
        the browser's HTML parser reads table rows as rows only when the text starts with them
        (after a ``<section>`` it drops their tags).
        """
        wholes: list[str] = []
        parts: list[str] = []
        for fragment in fragments:
            frame = _digest(fragment.frame())
            if self.digests.get(fragment.key) == frame:
                parts.extend(self._changed_parts(fragment.parts))
                continue
            self.digests[fragment.key] = frame
            for part in fragment.parts:
                self.digests[part.key] = _digest(part.html)
            if fragment.html.strip():
                wholes.append(fragment.html)
        return wholes, parts

    def _changed_parts(self, parts: Iterable[Fragment]) -> list[str]:
        out = []
        for part in parts:
            digest = _digest(part.html)
            if self.digests.get(part.key) != digest:
                self.digests[part.key] = digest
                out.append(part.html)
        return out


@dataclass(frozen=True)
class LiveCounts:
    """What the spoken summary compares between pushes."""

    answers: int
    open_flags: frozenset[int]


def live_counts(*, question: Question) -> LiveCounts:
    """The question's analysed answers and its open flags, as the dashboard shows them."""
    answers = (
        QualitySnapshot.objects.filter(question=question)
        .order_by("-created_at", "-id")
        .values_list("n_annotations", flat=True)
        .first()
    )
    flags = Flag.objects.filter(question=question, status=Flag.Status.OPEN, active=True)
    return LiveCounts(answers or 0, frozenset(flags.values_list("pk", flat=True)))


def _count(n: int, noun: str) -> str:
    return f"{n:,} new {noun}{'' if n == 1 else 's'}"


def announcement(before: LiveCounts, after: LiveCounts) -> str:
    """What changed, in words: ``"3 new answers; 1 new flag"`` ("" when nothing new)."""
    answers = after.answers - before.answers
    flags = len(after.open_flags - before.open_flags)
    said = [_count(answers, "answer")] if answers > 0 else []
    return "; ".join([*said, *([_count(flags, "flag")] if flags else [])])


def _model_values(instance: Any) -> tuple[Any, ...]:
    return tuple(getattr(instance, f.attname) for f in instance._meta.concrete_fields)


def figures_inputs(row: Any, context: Mapping[str, Any]) -> tuple[Any, ...]:
    """Everything the ``annotator-figures`` partial reads for ``row``: its name, figures,
    trend and whether it is excluded (the badge)."""
    return (
        row.user_id,
        row.name,
        [sorted(cell.items()) for cell in row.cells],
        row.exclusion is not None,
        row.trend,
        row.trend_note,
        context["spark_w"],
        context["spark_h"],
    )


def actions_inputs(row: Any, context: Mapping[str, Any]) -> tuple[Any, ...]:
    """Everything the ``annotator-actions`` partial reads for ``row``: its flags' and
    exclusion's fields (and who excluded), and the page's names its forms link with."""
    exclusion = row.exclusion
    return (
        row.user_id,
        row.name,
        [_model_values(flag) for flag in row.flags],
        (_model_values(exclusion), exclusion.by.get_username()) if exclusion else None,
        context["study"].pk,
        context["question"].pk,
        len(context["columns"]),
        context.get("csrf_token"),
    )


#: The parts of an annotator's row (``annotator-row``), each rendered again only when what it
#: reads changed: an answer moves the figures; a flag or an exclusion changes the actions.
ROW_PARTS = (("annotator-figures", figures_inputs), ("annotator-actions", actions_inputs))


@dataclass
class RenderedRow:
    """One row as a connection rendered it last: each part's inputs and HTML, and the row's."""

    parts: tuple[tuple[tuple[Any, ...], str], ...]
    html: str


@dataclass
class RenderedRows:
    """The annotator rows one connection rendered last (:class:`RenderedRow`).

    A push renders a row's part again only when what it reads changed (:data:`ROW_PARTS`).
    Between two pushes most annotators' rows stay the same (their figures move when they or
    those sharing their items answer), and the rows were 73 % of a push's CPU (38 of 52 ms
    with 128 annotators); under a crowd every row's figures move, but its actions (forms,
    links: about half of a row's CPU) stay as they were.
    """

    rendered: dict[int, RenderedRow] = field(default_factory=dict)

    def html(self, rows: Iterable[Any], context: Mapping[str, Any], render: Any) -> list[str]:
        """Each row's HTML, its parts rendered by ``render(partial, row=row)`` only if their
        inputs changed, then put into the row (``row_parts``); rows no longer shown are
        forgotten."""
        before, self.rendered = self.rendered, {}
        out = []
        for row in rows:
            last = before.get(row.user_id)
            parts = []
            for k, (name, inputs_of) in enumerate(ROW_PARTS):
                inputs = inputs_of(row, context)
                if last is not None and last.parts[k][0] == inputs:
                    parts.append(last.parts[k])
                else:
                    parts.append((inputs, render(name, row=row)))
            texts = [text for _, text in parts]
            if last is not None and texts == [text for _, text in last.parts]:
                html = last.html
            else:
                html = render("annotator-row", row=row, row_parts=texts)
            self.rendered[row.user_id] = RenderedRow(tuple(parts), html)
            out.append(html)
        return out


def live_fragments(
    context: dict[str, Any], *, plots: bool, rendered_rows: RenderedRows | None = None
) -> list[Fragment]:
    """The dashboard's pushed fragments from its context (the plots only with ``plots``).

    Each is a partial of the page's own template, so a push looks exactly like a reload; the
    annotators card has one part per row (the ``annotator-row`` partial), rendered once and
    put into the card as rendered (``rows_html``: the same text as the card's own loop), or
    taken from ``rendered_rows`` when its inputs did not change since that connection's last
    push. With the plots they are, in order, the template's ``live`` partial (the page's htmx
    refresh).
    """

    def render(name: str, **extra: Any) -> str:
        return render_to_string(f"{TEMPLATE}#{name}", {**context, **extra})

    shown = context.get("rows", ())
    cache = rendered_rows if rendered_rows is not None else RenderedRows()
    html = cache.html(shown, context, render)
    rows = tuple(
        Fragment(f"row-{row.user_id}", text) for row, text in zip(shown, html, strict=True)
    )
    plot_cards = ["heatmap", "map", "interval-plots", "kind-plots"]
    names = ["summary", "annotators", *(plot_cards if plots else [])]
    return [
        Fragment(name, render(name, rows_html=[row.html for row in rows]), rows)
        if name == "annotators"
        else Fragment(name, render(name))
        for name in [*names, "kind-cards", "trends"]
    ]


def announcement_html(text: str) -> str:
    """The out-of-band swap that puts ``text`` into the page's ``aria-live`` region."""
    return render_to_string(f"{TEMPLATE}#announce", {"announcement": text})
