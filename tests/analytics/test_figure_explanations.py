"""Every figure a manager sees has its plain explanation and which way is good (issue #27,
point 2), declared once beside the figure and printed by the dashboard and docs/dashboard.md."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client

from analytics.figure_guide import figure_guide
from analytics.indicators import READINGS, FlagRule, Indicator
from apps.demo.management.commands.load_demo import EMOTIONS_NAME
from apps.studies.kinds import question_kinds
from apps.studies.models import Question, Study

DOCS = Path(__file__).resolve().parents[2] / "docs" / "dashboard.md"


def test_an_indicator_without_an_explanation_is_refused():
    with pytest.raises(ValueError, match="explanation"):
        Indicator("kappa", "Kappa", direction="higher", rule=FlagRule("kappa"))


def test_docs_hold_the_generated_guide():
    assert figure_guide() in DOCS.read_text()


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html))).strip()


@pytest.mark.django_db(transaction=True)
def test_no_figure_is_shown_without_its_explanation_and_reading():
    call_command("load_demo", "--skip-real-data", verbosity=0)
    client = Client()
    client.force_login(Study.objects.get(name=EMOTIONS_NAME).created_by)
    checked = set()
    for question in Question.objects.filter(kind__in=list(question_kinds())):
        html = client.get(
            f"/studies/{question.study_id}/quality/?question={question.pk}"
        ).content.decode()
        if 'id="quality-annotators"' not in html or "<thead>" not in html:
            continue
        kind = question_kinds()[question.kind]
        table = html[html.index('class="quality-table"') :]
        head = table[: table.index("</thead>")]
        headings = [_text(h) for h in re.findall(r'<th scope="col"[^>]*>(.*?)</th>', head)]
        figures = headings[1:-1]  # between "Annotator" and "Kappa trend"
        legend = html[html.index('class="quality-legend"') :]
        legend = legend[: legend.index("</dl>")]
        notes = {
            _text(dt): _text(dd)
            for dt, dd in re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", legend, re.S)
        }
        assert figures, question.kind
        for heading in figures:
            spec = next(s for s in kind.indicators if s.heading == heading)
            assert notes.get(heading) == f"{spec.explanation} {READINGS[spec.direction]}"
            checked.add((question.kind, heading))
        # the study figures in the summary: each card has its line
        summary = html[html.index('id="quality-summary"') : html.index('id="quality-annotators"')]
        cards = re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", summary, re.S)
        for label, body in cards:
            figure = next((f for f in kind.study_figures if _text(label).startswith(f.label)), None)
            if figure is not None:
                assert f'<span class="quality-explanation">{figure.explanation}' in unescape(body)
                checked.add((question.kind, figure.label))
        # a kappa's cells carry their Landis-Koch word
        for spec in kind.indicators:
            if spec.banded and spec.heading in figures:
                assert re.search(
                    r'quality-band">(poor|slight|fair|moderate|substantial|almost perfect)<', table
                ), spec.heading
    assert {kind for kind, _ in checked} >= {"categorical", "pairwise"}
