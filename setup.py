"""Ship the top-level ``templates/`` and ``static/`` inside the ``annotate_site`` package.

Everything else about the build is in ``pyproject.toml``; this hook only copies the two folders
into the wheel, so an installed studio finds them next to its settings (no symlinks in the
repository: some transports of a checkout turn them into plain files).
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("templates", "static")


class BuildWithSiteFiles(build_py):
    def run(self) -> None:
        super().run()
        for name in SHIPPED:
            self.copy_tree(name, str(Path(self.build_lib, "annotate_site", name)))


setup(cmdclass={"build_py": BuildWithSiteFiles})
