"""Where audee's shipped data lives: inside the package (``audee/data/``), found through
``importlib.resources`` so a wheel install reads the same files as a source checkout.

Each can be overridden by an environment variable, for installs that keep data elsewhere.
"""
from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path


def data_dir() -> Path:
    """The package's data folder (a real directory: audee is never installed zipped)."""
    return Path(str(files("audee") / "data"))


def _dir(env: str, default: str) -> Path:
    return Path(os.environ.get(env) or data_dir() / default)


def seeds_dir() -> Path:
    return _dir("AUDEE_SEEDS", "seeds")


def api_configs_dir() -> Path:
    return _dir("AUDEE_API_CONFIGS", "api_configs")
