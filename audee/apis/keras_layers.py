"""Every layer class Keras can build, by name, without importing Keras.

A user's model may hold any ``keras.layers`` layer; only mutation needs an API config.
Validating a spec runs in the parent process, where importing Keras costs seconds and a
framework, so the names of the pinned Keras are stored in ``keras_layers.json`` beside
this file (aliases such as ``MaxPool2D`` included, and each layer's other names: the
known-issue matcher reads them); ``python -m audee.apis.keras_layers``
rewrites it from the installed Keras, and a test checks it still matches.
"""
from __future__ import annotations

import inspect
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

TABLE = Path(__file__).resolve().parent / "keras_layers.json"


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    if not TABLE.is_file():  # an installation without the file: every name passes to the workers
        return {"keras": None, "layers": []}
    return json.loads(TABLE.read_text())


def keras_version() -> str | None:
    """The Keras version the stored list was made from."""
    return _table()["keras"]


def known_layers() -> frozenset[str]:
    """Names of every public ``keras.layers`` Layer class (aliases too)."""
    return frozenset(_table()["layers"])


#: Keras layers whose parameters are code or a file of code (a Python callable, a SavedModel
#: path, a wrapped torch/JAX/Flax module): a spec or case file naming one would choose code
#: to run, so audee refuses them wherever a model is validated or built.
CODE_LAYERS = frozenset({"Lambda", "TFSMLayer", "TorchModuleWrapper", "JaxLayer", "FlaxLayer"})


def runs_code(api: str) -> bool:
    """Whether layer ``api`` would run code its parameters name (:data:`CODE_LAYERS`)."""
    return api in CODE_LAYERS


def is_keras_layer(api: str) -> bool:
    """Whether ``keras.layers.<api>`` is a layer class (True when no list is installed:
    the backends then say)."""
    names = known_layers()
    return not names or api in names


def layer_aliases() -> dict[str, list[str]]:
    """``{layer API: its other names}``: the public names of the same Keras class and of the
    Keras layers it subclasses (``Layer`` itself left out): ``ReversibleEmbedding`` is an
    ``Embedding``, ``MaxPool2D`` is ``MaxPooling2D``.  Known issues match on them."""
    return _table().get("aliases") or {}


def snake_name(api: str) -> str:
    """A layer API's snake_case name (``Conv2DTranspose``: ``conv2d_transpose``,
    ``ConvLSTM2D``: ``conv_lstm2d``): the name of the Keras module that defines it, and the
    stem of a layer name a mutation gives."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z0-9])(?=[A-Z][a-z])", "_", api).lower()


def output_activation(api: str, params: dict[str, Any]) -> str | None:
    """The activation layer ``api`` applies last, to its whole output, by name (Dense, the
    convolutions: ``activation(linear part)``), or None: none, a callable or config, the
    ``Activation`` layer itself (nothing before it), or a recurrent layer (its activation
    acts inside the cell, on every step's state).  The layer with ``activation: linear``
    then computes the activation's input, which is how a NaN oracle splits the two."""
    act = params.get("activation")
    if not isinstance(act, str) or act in ("linear", "") or api == "Activation":
        return None
    if is_recurrent(api):
        return None
    return act


def is_recurrent(api: str) -> bool:
    """Whether layer ``api`` is a Keras ``RNN`` (LSTM, GRU, SimpleRNN, the ConvLSTMs): its
    state, carried from step to step, is an input of every step after the first."""
    return api == "RNN" or "RNN" in layer_aliases().get(api, ())


def aliases_from(keras: Any) -> dict[str, list[str]]:
    """:func:`layer_aliases` as the given Keras module makes them."""
    classes = {n: getattr(keras.layers, n) for n in layer_names_from(keras)}
    by_class: dict[type, list[str]] = {}
    for n, c in classes.items():
        by_class.setdefault(c, []).append(n)
    out = {}
    for n, c in sorted(classes.items()):
        found = {a for b in c.__mro__ if b in by_class and b is not keras.layers.Layer for a in by_class[b]} - {n}
        if found:
            out[n] = sorted(found)
    return out


def layer_names_from(keras: Any) -> list[str]:
    """The list as the given Keras module makes it."""
    def is_layer(obj: Any) -> bool:
        return inspect.isclass(obj) and issubclass(obj, keras.layers.Layer)

    return sorted(n for n in dir(keras.layers) if is_layer(getattr(keras.layers, n)))


def main() -> None:
    import os

    os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras

    names = layer_names_from(keras)
    from audee.store.atomic import write_atomic

    write_atomic(TABLE, (json.dumps({"keras": keras.__version__, "layers": names, "aliases": aliases_from(keras)},
                                    indent=1) + "\n").encode())
    print(f"{TABLE}: {len(names)} layer names from Keras {keras.__version__}")


if __name__ == "__main__":
    main()
