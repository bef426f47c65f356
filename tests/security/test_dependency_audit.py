"""CI's dependency audit (.ci/audit_dependencies.py) against a stand-in vulnerability database.

pip-audit asks an OSV-compatible service about every installed package; here the service is a
small HTTP server on 127.0.0.1 that knows one advisory, so the test needs no network.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "audit_dependencies.py"
ADVISORY = {
    "id": "GHSA-test-0000-0000",
    "summary": "A stand-in advisory for the test.",
    "affected": [
        {
            "package": {"name": "django", "ecosystem": "PyPI"},
            "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "99.0"}]}],
        }
    ],
}


class _OSV(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        query = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = {"vulns": [ADVISORY]} if query["package"]["name"] == "django" else {}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def osv_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OSV)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/query"
    server.shutdown()
    server.server_close()


def audit(url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    options = ["--osv-url", url, "--cache-dir", str(tmp_path), "--timeout", "5"]
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--vulnerability-service", "osv", *options],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_known_vulnerability_is_printed_and_fails_ci(osv_url, tmp_path):
    run = audit(osv_url, tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "VULNERABLE django " in run.stdout
    assert "GHSA-test-0000-0000" in run.stdout
    assert "fixed in 99.0" in run.stdout
    assert "dependency audit: FAILED - 1 known vulnerability in 1 of " in run.stdout


def test_an_unreachable_database_is_said_loudly_and_does_not_fail_ci(tmp_path):
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    run = audit(f"http://127.0.0.1:{port}/v1/query", tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "dependency audit: NOT AUDITED - the vulnerability database could not be reached" in (
        run.stdout
    )


def test_a_database_that_knows_no_package_is_not_called_a_pass(capsys):
    # seen in CI: a registry mirror answers "not found" for every package
    spec = importlib.util.spec_from_file_location("audit_dependencies", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reason = "Dependency not found on PyPI and could not be audited: django (5.2)"
    assert module._report([{"name": "django", "version": "5.2", "skip_reason": reason}]) == 0
    out = capsys.readouterr().out
    assert "dependency audit: NOT AUDITED - the vulnerability database knew none of the 1" in out
    assert "passed" not in out
