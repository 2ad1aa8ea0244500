"""The settings models: one definition of every setting, its type, range and default.

Shared defaults are module constants so oracles, search, localization, the CLI and
campaign configs all read the same value.
"""
from __future__ import annotations

TIE_MARGIN = 1e-5       # label flips whose top-two outputs are closer than this are ties
TIMEOUT_S = 120.0       # seconds a backend may take on one request before it counts as hung
