"""``annotation-studio`` (and ``manage.py``): the studio's command line.

``serve [--demo]``
    Migrate, collect the static files and serve the studio with one daphne process on
    http://127.0.0.1:$PORT (8000). ``--demo`` also loads the demo studies, but never into a
    database given by ``DATABASE_URL``: the demo accounts' password is published.
``prod``
    The production stack of one machine (README: Deploying). Needs ``SECRET_KEY``,
    ``ALLOWED_HOSTS``, ``DATABASE_URL`` and ``REDIS_URL``; sets ``STUDIO_PRODUCTION=1`` and
    ``QUALITY_UPDATES=worker``, migrates, collects the static files, then runs the packaged
    ``Procfile`` with honcho: ``WEB_CONCURRENCY`` daphne processes (2) on consecutive ports from
    ``PORT`` (8000), on 127.0.0.1 behind a TLS proxy, and ``QUALITY_WORKERS`` quality workers (2).
Anything else
    A Django management command: ``annotation-studio migrate``, ``create_manager``, ...
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

PACKAGE_DIR = Path(__file__).resolve().parent
PROCFILE = PACKAGE_DIR / "Procfile"
ASGI_APPLICATION = "annotate_site.asgi:application"
PRODUCTION_NEEDS = ("SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL")


def main(argv: list[str] | None = None) -> None:
    """Run ``serve``, ``prod`` or a management command named in ``argv`` (``sys.argv``)."""
    argv = list(sys.argv if argv is None else argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate_site.settings")
    # Child processes (management steps, daphne, workers) import this same copy of the studio.
    search_path = [str(PACKAGE_DIR.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
    os.environ["PYTHONPATH"] = os.pathsep.join(search_path)
    command = argv[1] if len(argv) > 1 else ""
    if command == "serve":
        parser = argparse.ArgumentParser(prog=f"{Path(argv[0]).name} serve")
        parser.add_argument("--demo", action="store_true", help="load the demo studies too")
        serve(demo=parser.parse_args(argv[2:]).demo)
    elif command == "prod":
        argparse.ArgumentParser(prog=f"{Path(argv[0]).name} prod").parse_args(argv[2:])
        prod()
    else:
        from django.core.management import execute_from_command_line

        execute_from_command_line(argv)


def serve(*, demo: bool) -> NoReturn:
    """Set up the local database and serve it with one daphne process on 127.0.0.1."""
    _manage("migrate", "--noinput")
    _manage("collectstatic", "--noinput", "--verbosity", "0")
    if demo and os.environ.get("DATABASE_URL"):
        print("DATABASE_URL is set: the demo is not loaded into that database.")
    elif demo:
        _manage("load_demo")
    port = _env_int("PORT", 8000)
    print(f"Serving the studio at http://127.0.0.1:{port}/  (Ctrl-C stops it)", flush=True)
    _exec(sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), ASGI_APPLICATION)


def prod() -> NoReturn:
    """Check the environment, migrate, collect static files, then run the Procfile's stack."""
    missing = [name for name in PRODUCTION_NEEDS if not os.environ.get(name, "").strip()]
    if missing:
        sys.exit(f"error: the production stack needs {', '.join(missing)} (README: Deploying).")
    web, workers, port = (
        _env_int("WEB_CONCURRENCY", 2),
        _env_int("QUALITY_WORKERS", 2),
        _env_int("PORT", 8000),
    )
    os.environ.update(STUDIO_PRODUCTION="1", QUALITY_UPDATES="worker")
    # The Procfile says `python`: the interpreter running this command.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    _manage("migrate", "--noinput")
    _manage("collectstatic", "--noinput", "--verbosity", "0")
    print(f"Production stack: {web} x daphne, {workers} x quality worker. Listening on:")
    for instance in range(web):
        print(f"  web.{instance + 1}  http://127.0.0.1:{port + instance}/  (HTTP and websockets)")
    print("Point the TLS proxy at these addresses (README: Deploying). Ctrl-C stops all.")
    sys.stdout.flush()
    # honcho looks for .env beside the Procfile (there is none): the environment is the one
    # checked above, so the checks, the migration and the processes all see the same settings.
    honcho = ["start", "--no-colour", "-d", str(PACKAGE_DIR), "-f", str(PROCFILE), "-p", str(port)]
    _exec(sys.executable, "-m", "honcho", *honcho, "-c", f"web={web},worker={workers}")


def _manage(*args: str) -> None:
    """Run a management command in a child process; stop here if it fails."""
    subprocess.run([sys.executable, "-m", "annotate_site", *args], check=True)


def _exec(*command: str) -> NoReturn:
    """Replace this process with ``command`` (signals such as Ctrl-C then reach it directly)."""
    os.execv(command[0], command)


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip() or str(default)
    if not value.isdigit() or int(value) < 1:
        sys.exit(f"error: {name} must be a positive whole number, not {value!r}.")
    return int(value)
