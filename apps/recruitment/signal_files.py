"""Reading a gold trace's true signal from an uploaded file (CSV or NumPy ``.npy``).

A CSV holds one number per line (an optional header line naming the column first); an
``.npy`` file one 1-D numeric array (no pickled objects). Values lie in [0, 1]. The file is
read whole or refused with one message naming the problem (and the line, for a CSV).
"""

from __future__ import annotations

import io
import math

import numpy as np
from django.core.exceptions import ValidationError
from numpy.typing import NDArray

from apps.exchange.formats import npy_header

MAX_SIGNAL_BYTES = 4 * 1024 * 1024
"""Largest accepted file: about 400,000 CSV samples, an hour at 100 Hz in float64 NPY."""


def _invalid(message: str) -> ValidationError:
    return ValidationError({"file": message})


def signal_read(*, data: bytes, name: str) -> NDArray[np.float64]:
    """The samples of an uploaded signal file; ``ValidationError`` on ``file`` otherwise."""
    if len(data) > MAX_SIGNAL_BYTES:
        raise _invalid(f"The file has {len(data):,} bytes; send at most {MAX_SIGNAL_BYTES:,}.")
    suffix = name.lower().rsplit(".", 1)[-1]
    if suffix == "npy":
        values = _npy(data)
    elif suffix == "csv":
        values = _csv(data)
    else:
        raise _invalid("Upload a .csv or .npy file.")
    if values.size < 2:
        raise _invalid("A signal needs at least two samples.")
    if not (np.isfinite(values).all() and (values >= 0).all() and (values <= 1).all()):
        raise _invalid("Every value must be a number in [0, 1].")
    return values


def _npy(data: bytes) -> NDArray[np.float64]:
    try:
        shape, dtype = npy_header(io.BytesIO(data))
        if math.prod(shape) * dtype.itemsize > len(data):  # declares more than the file holds
            raise ValueError
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError):
        raise _invalid("This is not a readable .npy file.") from None
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "iuf":
        raise _invalid("The .npy file must hold numbers.")
    if array.ndim != 1:
        raise _invalid(f"The .npy array must have one column; it has shape {array.shape}.")
    return array.astype(np.float64)


def _csv(data: bytes) -> NDArray[np.float64]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _invalid("The CSV file is not UTF-8 text.") from None
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), start=1)]
    lines = [(n, line) for n, line in lines if line]
    values = []
    for position, (n, line) in enumerate(lines):
        try:
            values.append(float(line))
        except ValueError:
            if position == 0 and len(lines) > 1 and line.isidentifier():
                continue  # a header naming the column
            raise _invalid(f"line {n}: {line[:40]!r} is not one number.") from None
    return np.asarray(values, dtype=np.float64)
