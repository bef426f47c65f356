"""``annotation-studio`` (and ``manage.py``): the studio's command line.

``serve [--demo]``
    Migrate, collect the static files and serve the studio on http://127.0.0.1:$PORT (8000):
    ``WEB_CONCURRENCY`` web processes (2) sharing the port and ``QUALITY_WORKERS`` quality
    workers (1), run by the studio's supervisor (docs/serving.md). ``--demo`` also loads the
    demo studies, but never into a database given by ``DATABASE_URL``: the demo accounts'
    password is published.
``prod``
    The production stack of one machine (docs/serving.md). Needs ``SECRET_KEY``,
    ``ALLOWED_HOSTS``, ``DATABASE_URL`` and ``REDIS_URL``; sets ``STUDIO_PRODUCTION=1``,
    migrates, collects the static files, then runs what ``serve`` runs on 127.0.0.1:$PORT
    behind a TLS proxy, trusting its ``X-Forwarded-*`` headers.
Anything else
    A Django management command: ``annotation-studio migrate``, ``create_manager``, ...
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import NoReturn

from annotate_site.connection_balance import create_table
from annotate_site.supervisor import Program, Supervisor

PACKAGE_DIR = Path(__file__).resolve().parent
PRODUCTION_NEEDS = ("SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL")


def main(argv: list[str] | None = None) -> None:
    """Run ``serve``, ``prod`` or a management command named in ``argv`` (``sys.argv``)."""
    argv = list(sys.argv if argv is None else argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate_site.settings")
    # Child processes (management steps, web processes, workers) import this copy of the studio.
    search_path = [str(PACKAGE_DIR.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
    os.environ["PYTHONPATH"] = os.pathsep.join(search_path)
    command = argv[1] if len(argv) > 1 else ""
    if command in ("", "-h", "--help", "help") and len(argv) <= 2:
        name = Path(argv[0]).name
        print(usage("annotation-studio" if name in ("__main__.py", "-c") else name))
    elif command == "serve":
        parser = argparse.ArgumentParser(prog=f"{Path(argv[0]).name} serve")
        parser.add_argument("--demo", action="store_true", help="load the demo studies too")
        serve(demo=parser.parse_args(argv[2:]).demo)
    elif command == "prod":
        argparse.ArgumentParser(prog=f"{Path(argv[0]).name} prod").parse_args(argv[2:])
        prod()
    else:
        from django.core.management import execute_from_command_line

        execute_from_command_line(argv)


def usage(program: str) -> str:
    """The studio's own commands first (``serve``, ``prod`` and the management commands of its
    apps, each with its help line), then where Django's are listed. ``--help`` printed
    Django's list alone, without ``serve`` or ``prod``."""
    import django
    from django.core.management import get_commands, load_command_class

    django.setup()
    own = {
        name: app
        for name, app in get_commands().items()
        if app.startswith(("apps.", "analytics", "annotate_site"))
    }
    lines = [
        f"usage: {program} <command> [options]",
        "",
        "The studio:",
        "  serve [--demo]       serve the studio on http://127.0.0.1:$PORT (8000); --demo loads",
        "                       the demo studies (docs/deploying.md)",
        "  prod                 the production stack of one machine (docs/serving.md)",
    ]
    for name in sorted(own):
        first = load_command_class(own[name], name).help.split(". ")[0].strip().rstrip(".")
        lines.append(f"  {name:<20} {textwrap.shorten(first, width=58, placeholder='…')}")
    lines += [
        "",
        f"Django's own commands (migrate, createsuperuser, ...): {program} help --commands",
        f"Help on one command: {program} <command> --help",
    ]
    return "\n".join(lines)


def serve(*, demo: bool) -> NoReturn:
    """Set up the local database and serve it on 127.0.0.1 (see the module docstring)."""
    _manage("migrate", "--noinput")
    _manage("collectstatic", "--noinput", "--verbosity", "0")
    if demo and os.environ.get("DATABASE_URL"):
        print("DATABASE_URL is set: the demo is not loaded into that database.")
    elif demo:
        _manage("load_demo")
    port = _env_int("PORT", 8000)
    print(f"Serving the studio at http://127.0.0.1:{port}/  (Ctrl-C stops it)", flush=True)
    sys.exit(supervise(port=port, proxy_headers=False))


def prod() -> NoReturn:
    """Check the environment, migrate, collect static files, then run the stack."""
    missing = [name for name in PRODUCTION_NEEDS if not os.environ.get(name, "").strip()]
    if missing:
        sys.exit(f"error: the production stack needs {', '.join(missing)} (docs/serving.md).")
    os.environ["STUDIO_PRODUCTION"] = "1"
    _manage("migrate", "--noinput")
    _manage("collectstatic", "--noinput", "--verbosity", "0")
    port = _env_int("PORT", 8000)
    print(f"Production stack on http://127.0.0.1:{port}/ (HTTP and websockets): point the TLS")
    print("proxy at it (docs/serving.md). Ctrl-C or SIGTERM stops it.", flush=True)
    sys.exit(supervise(port=port, proxy_headers=True))


def supervise(*, port: int, proxy_headers: bool) -> int:
    """Listen on 127.0.0.1:``port`` and run the web processes on it and the quality workers
    beside them under :class:`~annotate_site.supervisor.Supervisor`; its exit code.

    On Linux each web process gets a listening socket of its own on the port
    (``SO_REUSEPORT``): the kernel spreads new connections evenly over the processes, where one
    shared socket let the first process to accept take nearly all of a burst of keep-alive
    connections (measured: one process at 88 % of a core, the other idle; 128 answers/s against
    174 spread). The sockets are opened here and kept for the supervisor's life, so the
    connections that reach a process that crashed wait in its socket's queue for its restart
    (about 2 s) instead of being reset. Elsewhere the processes share one socket. A keep-alive
    connection stays on the process it reached, so the web processes even out their shares
    through a table of their connection counts in the supervisor's private directory
    (:mod:`annotate_site.connection_balance`).
    """
    web, workers = _env_int("WEB_CONCURRENCY", 2), _env_int("QUALITY_WORKERS", 1)
    spread = sys.platform == "linux"
    try:
        _listener(port, reuse_port=False).close()  # anything on the port (a studio too) stops here
        listeners = [_listener(port, reuse_port=spread) for _ in range(web if spread else 1)]
    except OSError as exc:
        sys.exit(f"error: cannot listen on 127.0.0.1:{port} ({exc.strerror}); set PORT.")
    fds = [listener.fileno() for listener in listeners] * (1 if spread else web)
    web_command = [sys.executable, "-m", "annotate_site.webserver"]
    web_command += ["--proxy-headers"] * proxy_headers
    print(f"{web} web process(es), {workers} quality worker(s).", flush=True)
    # the web processes share their connection counts (annotate_site.connection_balance) and,
    # without Redis, their dashboard pushes (one socket per process in peers/) in this directory
    with tempfile.TemporaryDirectory(prefix="studio-") as private:
        (peers := Path(private) / "peers").mkdir()
        create_table(table := Path(private) / "web-connections", web)
        programs = [
            Program(
                f"web.{n}",
                [*web_command, "--fd", str(fd), "--share", str(table), str(n - 1), str(web)],
                (fd,),
            )
            for n, fd in enumerate(fds, start=1)
        ]
        worker_command = [sys.executable, "-m", "annotate_site", "quality_worker"]
        programs += [Program(f"quality.{n}", worker_command) for n in range(1, workers + 1)]
        env = {**os.environ, "QUALITY_UPDATES": "worker", "STUDIO_CHANNEL_PEERS": str(peers)}
        return Supervisor(programs, env=env).run()


def _listener(port: int, *, reuse_port: bool) -> socket.socket:
    """An inheritable socket listening on 127.0.0.1:``port`` (``OSError`` if it cannot);
    ``reuse_port``: one of a group among which the kernel spreads new connections."""
    listener = socket.socket()
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(2048)
    except OSError:
        listener.close()
        raise
    listener.set_inheritable(True)
    return listener


def _manage(*args: str) -> None:
    """Run a management command in a child process; stop here if it fails."""
    subprocess.run([sys.executable, "-m", "annotate_site", *args], check=True)


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip() or str(default)
    if not value.isdigit() or int(value) < 1:
        sys.exit(f"error: {name} must be a positive whole number, not {value!r}.")
    return int(value)
