"""Backends: one module per framework family behind the small interface in ``base``.

Each backend runs inside its own worker process (``worker``), supervised by ``pool``.
"""
