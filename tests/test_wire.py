"""The parent-worker wire format: messages with out-of-band arrays over a real socket."""
from __future__ import annotations

import os
import socket
import threading

import ml_dtypes
import numpy as np
import pytest

from audee.backends import wire


def _round_trip(message: object) -> object:
    a, b = socket.socketpair()
    got: dict[str, object] = {}
    reader = threading.Thread(target=lambda: got.setdefault("m", wire.recv(b.fileno())))
    reader.start()  # a message larger than the socket's buffer needs the reader going
    try:
        wire.send(a.fileno(), message)
        reader.join(30)
    finally:
        a.close()
        b.close()
    return got["m"]


def test_arrays_of_every_layout_and_dtype_come_back_equal_and_writable():
    message = {
        "weights": {"conv": [np.arange(24, dtype=np.float32).reshape(2, 3, 4), np.zeros(0, np.float16)]},
        "fortran": np.asfortranarray(np.arange(12.0).reshape(3, 4)),
        "strided": np.arange(20).reshape(4, 5)[:, ::2],  # not contiguous: goes inside the pickle
        "bfloat16": np.arange(6, dtype=ml_dtypes.bfloat16),
        "scalar": np.float32(2.5), "zero_d": np.array(7), "objects": np.array([1, "x"], dtype=object),
        "text": "hello", "raw": b"bytes",
    }
    got = _round_trip(message)
    for key in ("fortran", "strided", "bfloat16", "zero_d", "objects"):
        assert got[key].dtype == message[key].dtype and np.array_equal(got[key], message[key]), key
    assert got["fortran"].flags.f_contiguous
    conv = got["weights"]["conv"]
    assert np.array_equal(conv[0], message["weights"]["conv"][0]) and conv[1].shape == (0,)
    assert conv[0].flags.writeable  # a backend may write into what it was sent
    assert (got["scalar"], got["text"], got["raw"]) == (np.float32(2.5), "hello", b"bytes")


def test_a_message_larger_than_the_socket_buffer_with_more_buffers_than_one_call_takes():
    rng = np.random.default_rng(0)
    message = {"big": rng.standard_normal(3_000_000).astype(np.float32),  # 12 MB
               "many": [np.full(5, i, np.int64) for i in range(wire._IOV_MAX * 3 + 7)]}
    frames = wire.dumps(message)
    assert len(frames.buffers) == len(message["many"]) + 1
    assert len(frames.head) < 200_000  # the arrays' bytes are not in the pickle stream
    got = _round_trip(frames)  # Frames go out as the message they hold, to one worker or several
    assert np.array_equal(got["big"], message["big"])
    assert all(np.array_equal(x, y) for x, y in zip(got["many"], message["many"]))


def test_a_closed_connection_is_an_eof_even_in_the_middle_of_a_message():
    a, b = socket.socketpair()
    a.close()
    with pytest.raises(EOFError):
        wire.recv(b.fileno())
    b.close()
    a, b = socket.socketpair()
    frames = wire.dumps({"x": np.ones(1000)})
    os.write(a.fileno(), frames.head)  # the head, then the sender dies before the array
    a.close()
    with pytest.raises(EOFError):
        wire.recv(b.fileno())
    b.close()
