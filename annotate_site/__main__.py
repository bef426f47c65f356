"""``python -m annotate_site ...``: the same program as ``annotation-studio`` and ``manage.py``."""

from annotate_site.cli import main

main()
