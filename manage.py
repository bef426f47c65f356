#!/usr/bin/env python
"""Django's command-line utility, plus ``serve`` and ``prod``: see ``annotate_site/cli.py``."""

from annotate_site.cli import main

if __name__ == "__main__":
    main()
