"""A real model served over HTTP on 127.0.0.1 for the model endpoint tests.

A scikit-learn classifier (TF-IDF + logistic regression) trained on a study's answers, served by
``http.server.ThreadingHTTPServer`` in a thread on a free port, speaking both formats the studio
calls: the plain JSON POST (``/json``) and OpenAI-compatible chat completions
(``/v1/chat/completions``, with the first token's ``top_logprobs`` = log(predict_proba) when
asked for ``logprobs``). Knobs make it fail on purpose: sleep past the time-out, answer with
an HTTP status, answer garbage, or fail the first few requests only.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
from django.db.models.fields.json import KeyTextTransform
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline

from apps.annotations.models import Annotation
from apps.studies.models import Question


def train_on_answers(question: Question) -> Pipeline:
    """TF-IDF + logistic regression fitted on the question's answers so far (item text ->
    answered label key)."""
    rows = list(
        Annotation.objects.filter(question=question)
        .annotate(key=KeyTextTransform("label", "current_revision__value"))
        .order_by("pk")
        .values_list("item__text", "key")
    )
    assert rows, "the study needs answers to train on"
    texts, keys = zip(*rows, strict=True)
    return make_pipeline(TfidfVectorizer(), LogisticRegression(C=10.0, max_iter=1000)).fit(
        list(texts), list(keys)
    )


@dataclass
class Behaviour:
    """How the server answers (changed by the tests between calls)."""

    sleep: float = 0.0
    status: int = 200
    fail_first: int = 0  # answer ``status`` to this many requests, then normally
    body: bytes | None = None  # a fixed answer (malformed ones)
    openai_case: str = "name"  # "name": "  Positive.\n" ; "key": the key upper-cased


@dataclass
class ModelServer:
    classifier: Pipeline
    url: str
    behaviour: Behaviour = field(default_factory=Behaviour)
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def predict(self, text: str) -> tuple[str, dict[str, float]]:
        probabilities = self.classifier.predict_proba([text])[0]
        classes = [str(c) for c in self.classifier.classes_]
        return classes[int(np.argmax(probabilities))], dict(
            zip(classes, map(float, probabilities), strict=True)
        )


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            payload = json.loads(self.rfile.read(length))
            b = server.behaviour
            with server.lock:
                server.requests.append(
                    {
                        "path": self.path,
                        "body": payload,
                        "authorization": self.headers.get("Authorization"),
                    }
                )
                n = len(server.requests)
            if b.sleep:
                time.sleep(b.sleep)
            if b.status != 200 and (not b.fail_first or n <= b.fail_first):
                self._send(b.status, b'{"error": "down"}')
                return
            if b.body is not None:
                self._send(200, b.body)
                return
            if self.path == "/v1/chat/completions":
                text = payload["messages"][-1]["content"].split("Item:\n", 1)[1]
                label, probabilities = server.predict(text)
                shown = label.title if b.openai_case == "name" else label.upper
                content = f"  {shown()}.\n" if b.openai_case == "name" else shown()
                choice: dict[str, Any] = {"message": {"role": "assistant", "content": content}}
                if payload.get("logprobs"):  # log(predict_proba) of the first token's keys
                    ranked = sorted(probabilities.items(), key=lambda kv: -kv[1])
                    top = [
                        {
                            "token": key.title() if b.openai_case == "name" else key.upper(),
                            "logprob": float(np.log(p)),
                        }
                        for key, p in ranked[: payload["top_logprobs"]]
                    ]
                    choice["logprobs"] = {"content": [{"token": shown(), "top_logprobs": top}]}
                answer = {"choices": [choice]}
            else:
                label, probabilities = server.predict(payload["item"]["text"])
                answer = {"label": label, "probabilities": probabilities}
            self._send(200, json.dumps(answer).encode())

    return Handler


def self_signed_localhost(directory: Path) -> tuple[Path, Path]:
    """``(certificate, key)`` PEM files of a self-signed certificate naming ``localhost`` only
    (no IP address), written in ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "localhost.pem", directory / "localhost.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@contextmanager
def model_server(
    classifier: Pipeline, *, tls: tuple[Path, Path] | None = None
) -> Iterator[ModelServer]:
    """The classifier served on a free port of 127.0.0.1 until the block ends; over TLS with
    ``tls`` = ``(certificate, key)`` files (its ``url`` then names ``localhost``)."""
    served = ModelServer(classifier=classifier, url="")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(served))
    httpd.daemon_threads = True
    served.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
        served.url = f"https://localhost:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield served
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
