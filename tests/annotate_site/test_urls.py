"""The URLs an annotator requests on every answer are tried first: the REST API before the
pages, the answer loop's routes before the manager's.

Django's resolver tries the patterns in order and, for every include it descends into without a
match, builds the list of what it tried: with the REST API last, ``POST /api/annotations/``
tried 116 patterns and took 11.7 % of a web process's CPU on the classic API loop (py-spy,
32 clients). ``ResolverMatch.tried`` counts that work without timing it.
"""

from __future__ import annotations

import pytest
from django.urls import resolve

#: The requests of one answer, per kind of work: pages (htmx POST) and the REST API.
ANSWER_LOOP = [
    ("/studies/1/annotate/", "queue"),
    ("/studies/1/compare/q/", "compare"),
    ("/studies/1/arena/q/", "arena"),
    ("/studies/1/traces/q/", "traces"),
    ("/api/annotations/", "annotation-list"),
    ("/api/studies/1/next/", "study-annotation-next"),
    ("/api/judgements/", "judgement-list"),
    ("/api/studies/1/pairs/q/next/", "study-pair-next"),
    ("/api/studies/1/arena/q/next/", "study-arena-next"),
    ("/api/studies/1/arena/q/vote/", "study-arena-vote"),
    ("/api/studies/1/traces/chunks/", "study-trace-chunks"),
]
#: Patterns tried before the match, at most: 7 to 46 now (format-suffix twins included), 8 to
#: 142 before (the API's 92 to 142).
TRIED_AT_MOST = 50


@pytest.mark.parametrize(("path", "name"), ANSWER_LOOP)
def test_an_answer_loop_request_is_resolved_after_few_patterns(path: str, name: str) -> None:
    match = resolve(path)
    assert match.url_name == name
    assert len(match.tried) <= TRIED_AT_MOST, [str(pattern[-1].pattern) for pattern in match.tried]
