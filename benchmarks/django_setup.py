"""Django for the benchmarks that seed and serve a studio of their own (outside pytest)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup_django(
    local_dir: Path, *, defaults: Mapping[str, str] = {}, fast_passwords: bool = False
) -> None:
    """Configure Django on a fresh SQLite file in ``local_dir`` (or ``DATABASE_URL``, which must
    name a database without studies: exits otherwise), migrated.

    ``defaults`` are environment variables set unless the caller's environment has them;
    ``fast_passwords`` hashes seeded users' passwords with MD5 (PBKDF2 costs ~0.3 s a user).
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate_site.settings")
    os.environ["STUDIO_LOCAL_DIR"] = str(local_dir)
    for name, value in defaults.items():
        os.environ.setdefault(name, value)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    if fast_passwords:
        settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    call_command("migrate", verbosity=0)
    from apps.studies.models import Study

    if os.environ.get("DATABASE_URL") and Study.objects.exists():
        # the seeds name their users user0, user1, ... (tests.factories gets or creates them):
        # on a database of an earlier run they were that run's users, members of its studies,
        # and live_latency's pushes never matched (9,788 errors in one run)
        raise SystemExit(
            f"{settings.DATABASES['default']['NAME']} already holds studies: the benchmarks "
            "need a new database (CREATE DATABASE ...) for each run"
        )
