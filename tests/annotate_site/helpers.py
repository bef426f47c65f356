"""Run the studio's command line in a child process with a chosen environment and free ports."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
# What a deployment sets (docs/deploying.md); DATABASE_URL/REDIS_URL are added where needed.
PRODUCTION_ENV = {
    "STUDIO_PRODUCTION": "1",
    "SECRET_KEY": secrets.token_urlsafe(50),
    "ALLOWED_HOSTS": "studio.example.org",
}
# Variables of the calling shell that would change what the child process configures.
_STUDIO_VARIABLES = (
    "DATABASE_URL",
    "REDIS_URL",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "DJANGO_DEBUG",
    "STUDIO_PRODUCTION",
    "STUDIO_HTTPS",
    "STUDIO_LOCAL_DIR",
    "QUALITY_UPDATES",
)


def child_env(local_dir: Path, **variables: str) -> dict[str, str]:
    """The caller's environment without the studio's variables, plus ``variables``."""
    env = {key: value for key, value in os.environ.items() if key not in _STUDIO_VARIABLES}
    return {**env, "STUDIO_LOCAL_DIR": str(local_dir), **variables}


def manage(
    *args: str, env: dict[str, str], cwd: Path = REPO, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python manage.py ARGS`` of this checkout, output captured."""
    return _python(str(REPO / "manage.py"), *args, env=env, cwd=cwd, timeout=timeout)


def python_code(
    code: str, *, env: dict[str, str], cwd: Path = REPO, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python -c CODE`` in this checkout, output captured."""
    return _python("-c", code, env=env, cwd=cwd, timeout=timeout)


def settings_value(expression: str, *, env: dict[str, str], before: str = "") -> Any:
    """``expression`` (of ``settings``), read in a child process that imports the settings
    alone, after running ``before``: the apps are not loaded (about 0.3 s a process, against
    2.5 s for ``manage.py shell``, which loads every app and the metrics library)."""
    code = (
        f"import json, os; {before}os.environ['DJANGO_SETTINGS_MODULE'] = 'annotate_site.settings';"
        f"from django.conf import settings; print('VALUE=' + json.dumps({expression}, default=str))"
    )
    result = python_code(code, env=env)
    assert result.returncode == 0, result.stderr
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("VALUE="))
    return json.loads(line.removeprefix("VALUE="))


def _python(
    *args: str, env: dict[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def free_ports(count: int = 1) -> int:
    """The first of ``count`` consecutive ports of 127.0.0.1 that nothing listens on.

    The system picks the first (a bind to port 0), so that tests running at the same time
    (pytest-xdist workers, another checkout's run) get different ones, as a port computed from
    the process id did not (``8340 + pid % 50`` gave two workers the same one in 50).
    """
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if all(_port_free(first + n) for n in range(1, count)):
            return first
    raise RuntimeError(f"no {count} consecutive free ports on 127.0.0.1")


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
