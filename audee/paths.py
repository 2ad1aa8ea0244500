"""Where audee's shipped data lives: resolved from the package location, never hard-coded.

Each can be overridden by an environment variable, for installs that keep data elsewhere.
"""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _dir(env: str, default: str) -> Path:
    return Path(os.environ.get(env) or ROOT / default)


def seeds_dir() -> Path:
    return _dir("AUDEE_SEEDS", "seeds")


def api_configs_dir() -> Path:
    return _dir("AUDEE_API_CONFIGS", "api_configs")
