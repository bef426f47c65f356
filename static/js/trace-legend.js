/*
 * trace-legend.js — the trace overlay's legend toggles one annotator's trace. No dependencies.
 *
 * Markup: a container [data-trace-overlay] holding polylines [data-series=k] and buttons
 * [data-trace-toggle=k] with aria-pressed. Delegated from the document, so overlays swapped in
 * by htmx work without re-binding.
 */
(function () {
  "use strict";
  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-trace-toggle]");
    if (!button) return;
    const overlay = button.closest("[data-trace-overlay]");
    const shown = button.getAttribute("aria-pressed") !== "true";
    button.setAttribute("aria-pressed", String(shown));
    overlay
      .querySelectorAll(`[data-series="${button.dataset.traceToggle}"]`)
      .forEach((line) => line.classList.toggle("is-hidden", !shown));
  });
})();
