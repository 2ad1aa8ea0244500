"""Where audee's shipped data lives, the one loader of its folders.

The seed models and the API configs are kept at the top of the repository (``seeds/``,
``api_configs/``), where a user reads and extends them; ``audee/data/seeds`` and
``audee/data/api_configs`` are symbolic links to them.  So a source checkout or an editable
install reads the top-level files through the links, and a wheel, into which setuptools
copies what the links point to, reads its own copies: found through
``importlib.resources`` either way.

Each can be overridden by an environment variable, for installs that keep data elsewhere.
"""
from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path


def data_dir() -> Path:
    """The package's data folder (a real directory: audee is never installed zipped; its
    ``seeds`` and ``api_configs`` are links in a checkout, copies in a wheel)."""
    return Path(str(files("audee") / "data"))


def _dir(env: str, default: str) -> Path:
    return Path(os.environ.get(env) or data_dir() / default)


def seeds_dir() -> Path:
    return _dir("AUDEE_SEEDS", "seeds")


def api_configs_dir() -> Path:
    return _dir("AUDEE_API_CONFIGS", "api_configs")
