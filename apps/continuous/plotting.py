"""Geometry of the server-rendered trace overlay: SVG coordinates, no markup."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from analytics.plotting import OKABE_ITO

WIDTH, HEIGHT, PAD = 800, 260, 28
PALETTE = (
    *(colour for colour in OKABE_ITO if colour not in ("#f0e442", "#000000")),
    "#332288",
    "#882255",
    "#661100",
    "#999933",
    "#aa4499",
    "#6b6b6b",
)
"""Okabe-Ito colours without the pale yellow (and black, kept for the truth, drawn dashed),
then Paul Tol's muted ones (his dark brown for his teal, too close to Okabe-Ito's bluish green),
so ten or twelve annotators stay distinguishable."""


@dataclass(frozen=True)
class Series:
    label: str
    colour: str
    points: str
    dashed: bool = False


@dataclass(frozen=True)
class Overlay:
    width: int
    height: int
    pad: int
    series: list[Series]
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]

    @property
    def right(self) -> int:
        return self.width - self.pad

    @property
    def bottom(self) -> int:
        return self.height - self.pad


def _points(
    values: NDArray[np.float64],
    *,
    rate_hz: float,
    duration: float,
    lo: float,
    hi: float,
    box: tuple[int, int, int] = (WIDTH, HEIGHT, PAD),
) -> str:
    width, height, pad = box
    t = np.arange(values.size) / rate_hz
    x = pad + t / max(duration, 1e-9) * (width - 2 * pad)
    y = height - pad - (np.clip(values, lo, hi) - lo) / (hi - lo) * (height - 2 * pad)
    return " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(x, y, strict=True))


SPARK = (240, 56, 3)
"""Width, height and padding of the small trace plots of the item page."""


def small_trace(
    values: NDArray[np.float64], *, rate_hz: float, duration: float, scale: tuple[float, float]
) -> str:
    """Polyline points of one trace in a :data:`SPARK` box (the item page's small plots)."""
    lo, hi = scale
    return _points(values, rate_hz=rate_hz, duration=duration, lo=lo, hi=hi, box=SPARK)


def green_strip(truth: NDArray[np.float64], *, bands: int = 96) -> list[str]:
    """The colours a calibration stimulus shows over its duration, in ``bands`` equal slices
    (the mean intensity of each, drawn as the recorder paints it: ``rgb(0, 255 v, 0)``)."""
    slices = np.array_split(np.clip(truth, 0, 1), min(bands, truth.size))
    return [f"rgb(0, {round(255 * float(part.mean()))}, 0)" for part in slices]


def overlay(
    traces: list[tuple[str, NDArray[np.float64]]],
    *,
    rate_hz: float,
    duration: float,
    scale: tuple[float, float],
    truth: NDArray[np.float64] | None = None,
) -> Overlay:
    """Polylines of each ``(label, trace)`` at ``rate_hz`` (and the truth), ready for a template."""
    lo, hi = scale
    series = [
        Series(
            label,
            PALETTE[i % len(PALETTE)],
            _points(v, rate_hz=rate_hz, duration=duration, lo=lo, hi=hi),
        )
        for i, (label, v) in enumerate(traces)
    ]
    if truth is not None:
        series.append(
            Series(
                "truth",
                "#1b1f24",
                _points(truth, rate_hz=rate_hz, duration=duration, lo=lo, hi=hi),
                dashed=True,
            )
        )
    step = max(1, int(np.ceil(duration / 10 / 5)) * 5) if duration > 10 else 1
    x_ticks = [
        (PAD + s / max(duration, 1e-9) * (WIDTH - 2 * PAD), f"{s:g} s")
        for s in np.arange(0, duration + 1e-9, step)
    ]
    y_ticks = [
        (HEIGHT - PAD - f * (HEIGHT - 2 * PAD), f"{lo + f * (hi - lo):g}") for f in (0, 0.5, 1)
    ]
    return Overlay(WIDTH, HEIGHT, PAD, series, x_ticks, y_ticks)
