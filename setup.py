"""Package list only (everything else is in pyproject.toml): the core's packages, and the language server,
whose source folder ``server/`` installs as ``xpiler_server``."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["xpiler_core", "xpiler_core.*"]), "xpiler_server"])
