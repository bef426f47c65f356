"""The settings form of continuous questions in the question editor.

The fields only read the values; :func:`apps.continuous.config.clean_trace_settings` checks
them, and the help texts quote the same constants it checks against.
"""

from __future__ import annotations

from django import forms

from apps.continuous.config import (
    MAX_LABEL_LENGTH,
    MAX_RECORDING_RATE_HZ,
    MIN_GAP_INTERVALS,
    ORIENTATIONS,
    TraceSettings,
)

DEFAULTS = TraceSettings()


def _number(label: str, name: str, help_text: str) -> forms.FloatField:
    return forms.FloatField(
        label=label,
        initial=getattr(DEFAULTS, name),
        help_text=help_text,
        widget=forms.NumberInput(attrs={"step": "any"}),
    )


class TraceSettingsForm(forms.Form):
    """A continuous question's settings, one field per setting of ``TraceSettings``."""

    label_min = forms.CharField(
        label="Low end label",
        required=False,
        max_length=MAX_LABEL_LENGTH,
        initial=DEFAULTS.label_min,
        help_text=f"Words at the slider's low end, at most {MAX_LABEL_LENGTH} characters.",
    )
    label_max = forms.CharField(
        label="High end label",
        required=False,
        max_length=MAX_LABEL_LENGTH,
        initial=DEFAULTS.label_max,
        help_text=f"Words at its high end, at most {MAX_LABEL_LENGTH} characters.",
    )
    orientation = forms.ChoiceField(
        choices=[(name, name.capitalize()) for name in ORIENTATIONS],
        initial=DEFAULTS.orientation,
        help_text="Horizontal: low on the left. Vertical: low at the bottom.",
    )
    scale_min = _number("Scale minimum", "scale_min", "The trace's value at the low end.")
    scale_max = _number(
        "Scale maximum", "scale_max", "The trace's value at the high end: above the minimum."
    )
    recording_rate_hz = _number(
        "Recording rate (Hz)",
        "recording_rate_hz",
        f"Slider samples kept per second: above 0 and at most {MAX_RECORDING_RATE_HZ:g}.",
    )
    analysis_rate_hz = _number(
        "Analysis rate (Hz)",
        "analysis_rate_hz",
        "Samples per second the agreement figures compare: above 0 and at most the recording rate.",
    )
    sda_tolerance = _number(
        "Change tolerance",
        "sda_tolerance",
        "Moves smaller than this count as no change in kappa_SDA: 0 or more, and smaller "
        "than the scale (maximum - minimum).",
    )
    max_gap_s = _number(
        "Longest gap (s)",
        "max_gap_s",
        "Longest pause between two samples a trace may have: at least "
        f"{MIN_GAP_INTERVALS:g} recording intervals ({MIN_GAP_INTERVALS:g} / recording rate).",
    )
    allow_pause = forms.BooleanField(
        required=False,
        initial=DEFAULTS.allow_pause,
        help_text="Annotators may pause the item while tracing.",
    )
    allow_seek = forms.BooleanField(
        required=False,
        initial=DEFAULTS.allow_seek,
        help_text="Annotators may go back 5 s and trace that part again.",
    )
    allow_redo = forms.BooleanField(
        required=False,
        initial=DEFAULTS.allow_redo,
        help_text="Annotators may trace an item again after finishing it: the new trace "
        "counts, the earlier one stays in the history.",
    )
