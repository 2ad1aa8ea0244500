"""The training phase's vocabulary (after Muffin): :mod:`audee.train.setup` — what a training
step is, as data: the loss and optimizer names and their draws, the step's settings
(:class:`~audee.train.setup.TrainSetup`), the targets every backend trains on, which layers
are random in training mode and how the training phase calls them, and each backend's answer
(:class:`~audee.train.setup.TrainOutcome`).

The rest of the training phase lives in the room of its layer (``docs/architecture.md``):
its oracles in :mod:`audee.oracle.train` (``train_deviation``, ``train_nan``, the crash kinds
with phases ``train``/``gradient``/``update``), its executor in :mod:`audee.engine.train`,
its GA in :mod:`audee.search.train`, its localizer in :mod:`audee.localize.train`, its
standalone scripts in :mod:`audee.repro.train`; the step itself runs inside each backend's
worker (:mod:`audee.backends.keras_train`).  See ``docs/oracles.md`` ("The training phase").
"""
