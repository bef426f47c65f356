"""The managers' guide to the dashboard's figures, from the one place each is declared.

Every :class:`~analytics.indicators.Indicator` and :class:`~analytics.indicators.StudyFigure`
of a registered question kind carries its plain explanation; the dashboard prints it where
the figure is shown, and :func:`figure_guide` writes the same lines as the Markdown section of
docs/dashboard.md. ``python -m analytics.figure_guide`` prints that section (a test checks the
page holds it).
"""

from __future__ import annotations

from analytics.indicators import BAND_MEANING, INTERVAL_MEANING

#: The heading of the generated section of docs/dashboard.md.
GUIDE_HEADING = "## What each figure means"


def figure_guide() -> str:
    """The Markdown section: per question kind, each study figure and annotator column with
    its explanation and which way is good, then the meaning of intervals and kappa words."""
    from apps.studies.kinds import question_kinds

    lines = [
        GUIDE_HEADING,
        "",
        "Generated from the figures' declarations (`python -m analytics.figure_guide`); the "
        "dashboard prints the same line under each figure.",
        "",
    ]
    for kind in question_kinds().values():
        if not (kind.study_figures or kind.indicators or kind.card_figures):
            continue  # a kind without dashboard figures (the model arena: its results page)
        lines += [f"### {kind.label}", ""]
        for figure in kind.study_figures:
            lines.append(f"- **{figure.label}** (whole question): {figure.explanation}")
        for spec in kind.indicators:
            lines.append(f"- **{spec.heading}**: {spec.explanation} {spec.reading}")
        for card_figure in kind.card_figures:
            lines.append(
                f"- **{card_figure.label}** ({card_figure.card} card): "
                f"{card_figure.explanation} {card_figure.reading}"
            )
        lines.append("")
    lines += [f"- {INTERVAL_MEANING}", f"- {BAND_MEANING}", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    import django

    django.setup()
    print(figure_guide(), end="")
