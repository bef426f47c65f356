"""Colours shared by the studio's plots (a module of constants: anything may import it)."""

#: Okabe & Ito (2008), the colour-blind-safe qualitative palette, black last: annotators'
#: points and lines across the dashboard, the trace overlays and the model-registry maps.
OKABE_ITO = (
    "#0072b2",
    "#e69f00",
    "#009e73",
    "#cc79a7",
    "#56b4e9",
    "#d55e00",
    "#f0e442",
    "#000000",
)
