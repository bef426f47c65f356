"""Cost of calling a model endpoint for a question's items (issue 28), against a bare loop.

A TF-IDF + logistic regression classifier, trained on the study's answers, is served over
HTTP on 127.0.0.1 (``tests/apps/models_registry/endpoint_server.py``, plain JSON format). This
prints the seconds per item of

* ``bare loop``: ``urllib.request.urlopen`` POSTing each item's body in a Python loop (the
  outside reference: the HTTP round trip and the model, nothing else);
* ``studio job``: :func:`apps.models_registry.services.model_endpoint_predict_pending`, which
  also reads the queue, takes each call from the budget (a conditional UPDATE), records it
  (``EndpointCall``) and stores the label (``ItemPrediction``);

and their ratio, with the load of the machine. Run with
``.venv/bin/python -m benchmarks.model_endpoints [--items 300]`` (SQLite in a temporary
directory unless ``DATABASE_URL`` is set).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import urllib.request
from pathlib import Path

from benchmarks.django_setup import setup_django


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as local:
        setup_django(Path(local), defaults={"QUALITY_UPDATES": "inline"}, fast_passwords=True)
        run(args.items)


def run(n_items: int) -> None:
    from django.conf import settings
    from django.db import connection

    from apps.models_registry.models import ItemPrediction
    from apps.models_registry.services import model_endpoint_predict_pending, model_endpoint_save
    from tests.apps.models_registry.endpoint_server import model_server, train_on_answers
    from tests.apps.models_registry.test_endpoints import text_study

    study, question, _ = text_study(n_items=n_items, n_answered=n_items // 2)
    items = list(study.items.order_by("position"))
    keys = list(question.labels.values_list("key", flat=True))
    with model_server(train_on_answers(question)) as server:
        url = server.url + "/json"
        started = time.perf_counter()
        for item in items:
            body = {"item": {"id": item.external_id, "text": item.text, "metadata": {}}}
            request = urllib.request.Request(
                url,
                data=json.dumps({**body, "labels": keys}).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                json.loads(response.read())
        bare = time.perf_counter() - started
        settings.QUALITY_UPDATES = "worker"  # save only; the job is timed below, alone
        settings.MODEL_ENDPOINT_ALLOWED_NETWORKS = ["127.0.0.1/32"]  # served on loopback
        endpoint = model_endpoint_save(
            question=question,
            created_by=study.created_by,
            kind="json",
            url=url,
            model="tfidf-logreg",
            max_calls=n_items,
        )
        settings.QUALITY_UPDATES = "inline"  # one pass over every item, as a worker's job
        started = time.perf_counter()
        stored = model_endpoint_predict_pending(endpoint_id=endpoint.pk)
        job = time.perf_counter() - started
    assert stored == n_items == ItemPrediction.objects.filter(run_id=endpoint.run_id).count()
    load = os.getloadavg()[0]
    print(f"{connection.vendor}, {n_items} items, load average {load:.2f} (2 cores shared)")
    print(f"bare loop:  {bare:6.2f} s, {1000 * bare / n_items:6.2f} ms per item")
    print(f"studio job: {job:6.2f} s, {1000 * job / n_items:6.2f} ms per item")
    print(f"ratio job / bare loop: {job / bare:.2f}")


if __name__ == "__main__":
    main()
