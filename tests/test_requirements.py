"""requirements.txt pins the whole install, not only the direct dependencies.

``make install`` builds ``.venv`` with ``pip install -r requirements.txt`` (audee itself goes
in with ``--no-deps``), so a distribution that some pin requires but the file does not pin
is whatever pip finds on the day: a fresh install can differ, silently, from the environment
the tests ran on.  From the installed metadata (no network, no resolver), this walks every
requirement the pins declare, with markers evaluated for this interpreter and an extra
followed only where a requirement names it, and checks that each distribution reached is
pinned with ``==`` and each pin is the installed version.  Names are compared as pip compares
them (PEP 503).
"""
from __future__ import annotations

import importlib.metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

REQUIREMENTS = Path(__file__).resolve().parent.parent / "requirements.txt"


def _requirements() -> list[Requirement]:
    """requirements.txt's requirement lines; comments, blank lines and pip options are left out."""
    out = []
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-")):
            out.append(Requirement(line))
    return out


def _pins() -> dict[NormalizedName, Requirement]:
    pins: dict[NormalizedName, Requirement] = {}
    for req in _requirements():
        name = canonicalize_name(req.name)
        assert name not in pins, f"requirements.txt names {req.name} twice ({pins[name]}, {req})"
        pins[name] = req
    return pins


def _pinned_version(req: Requirement) -> Version | None:
    """The version an exact ``==`` pin names, or None where the requirement is no such pin."""
    specs = list(req.specifier)
    if len(specs) != 1 or specs[0].operator != "==" or specs[0].version.endswith(".*"):
        return None
    return Version(specs[0].version)


def _closure(roots: list[Requirement]) -> tuple[dict[NormalizedName, str], dict[NormalizedName, str]]:
    """The distributions reached from ``roots`` through their declared requirements: each
    reached name with the chain that first reached it, and those not installed (their own
    requirements cannot be read) with the same chain."""
    reached: dict[NormalizedName, str] = {}
    missing: dict[NormalizedName, str] = {}
    extras_done: set[tuple[NormalizedName, str]] = set()
    todo: list[tuple[Requirement, str]] = [(r, "requirements.txt") for r in roots]
    while todo:
        req, via = todo.pop()
        name = canonicalize_name(req.name)
        reached.setdefault(name, via)
        extras = {""} | {canonicalize_name(e) for e in req.extras}
        new = {e for e in extras if (name, e) not in extras_done}
        if not new:
            continue
        extras_done.update((name, e) for e in new)
        try:
            dist = importlib.metadata.distribution(req.name)
        except importlib.metadata.PackageNotFoundError:
            missing.setdefault(name, via)
            continue
        for line in dist.requires or ():
            sub = Requirement(line)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in new):
                todo.append((sub, f"{via} -> {dist.metadata['Name']}"))
    return reached, missing


def test_every_distribution_the_pins_require_is_pinned() -> None:
    pins = _pins()
    roots = [r for r in pins.values() if r.marker is None or r.marker.evaluate()]
    reached, missing = _closure(roots)
    assert not missing, "required but not installed: " + "; ".join(
        f"{name} (via {via})" for name, via in sorted(missing.items()))
    unpinned = {name: via for name, via in reached.items()
                if name not in pins or _pinned_version(pins[name]) is None}
    assert not unpinned, "not pinned with == in requirements.txt: " + "; ".join(
        f"{name} (via {via})" for name, via in sorted(unpinned.items()))


def test_each_pin_is_the_installed_version() -> None:
    wrong = []
    for name, req in sorted(_pins().items()):
        pinned = _pinned_version(req)
        assert pinned is not None, f"{req}: not an exact == pin"
        try:
            installed = Version(importlib.metadata.version(name))
        except importlib.metadata.PackageNotFoundError:
            wrong.append(f"{req}: not installed")
            continue
        # a pin without a local label (torch==2.13.0) is met by a local build (2.13.0+cpu), as pip has it
        if installed != pinned and (pinned.local is not None or Version(installed.public) != pinned):
            wrong.append(f"{req}: installed {installed}")
    assert not wrong, "pins that are not the installed version: " + "; ".join(wrong)
