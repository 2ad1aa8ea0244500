"""The training phase (after Muffin): one training step of a test case on every
Keras backend, judged like the forward pass.

* :mod:`audee.train.setup` — what a training step is, as data: the loss and optimizer
  names and their draws, the step's settings (:class:`~audee.train.setup.TrainSetup`), the
  targets every backend trains on, which layers are random in training mode and how the
  training phase calls them, and each backend's answer
  (:class:`~audee.train.setup.TrainOutcome`);
* :mod:`audee.train.oracle` — the training-phase oracles: loss, gradients and updated
  weights out of tolerance (``train_deviation``), non-finite values on some backends only
  (``train_nan``), a backend failing to differentiate or update (the crash kinds, phase
  ``train``/``gradient``/``update``);
* :mod:`audee.train.run` — the executor of the training phase: a case trained on every
  backend at once, judged, and a deviation pinned on the layer whose gradient deviates on
  its own input (the layer alone, trained one step on both backends).

* :mod:`audee.train.search` — the GA at input / weight level with the gradient-distance
  fitness (:mod:`audee.fitness.gradient`);
* :mod:`audee.train.localize` — a training finding's layer and parameter (the layer alone,
  trained one step, with each alternative value of its parameters);
* :mod:`audee.train.repro` — standalone scripts that train one step on each backend.

The step itself runs inside each backend's worker (:mod:`audee.backends.keras_train`).
The modules sit in different layers (``docs/architecture.md``): ``setup`` is vocabulary,
``oracle`` judgement, ``run`` execute, ``search`` and ``repro`` runs of the executor,
``localize`` localize.  See ``docs/oracles.md`` ("The training phase").
"""
