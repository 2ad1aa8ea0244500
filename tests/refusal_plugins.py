"""A converter whose conversion fails without saying "unsupported", for the refusal-memo
tests: the TFLite converter + LiteRT (``litert``) with its converter step failing on every
model with a clean error of no limitation's words, as a converter bug would; like ``litert``
it converts TensorFlow's model, its reference."""
from __future__ import annotations

from typing import Any

import numpy as np

from audee.backends.base import BackendError, Phase
from audee.backends.keras_build import BuiltModel
from audee.backends.litert_backend import LiteRtBackend


class BrokenLiteRt(LiteRtBackend):
    name = "broken-litert"
    reference = "tensorflow"

    def _convert(self, model: BuiltModel, xs: list[np.ndarray]) -> Any:
        raise BackendError(Phase.CONVERT, "ConverterError: the flatbuffer's tensor 3 lost its shape on the way")
