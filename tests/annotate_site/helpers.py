"""Run the studio's command line in a child process with a chosen environment."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

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
    return subprocess.run(
        [sys.executable, str(REPO / "manage.py"), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
