/*
 * Dashboard pushes (htmx's ws extension) replace the cards and table rows that changed. A
 * replaced element loses the keyboard focus, so the control that had it (a flag's Confirm or
 * Dismiss button, a reason being typed) is found again by its id in the new HTML and focused,
 * with its text selection, as htmx itself does for its own swaps.
 */
(() => {
  "use strict";

  let focused = null;

  document.addEventListener("htmx:wsBeforeMessage", () => {
    const element = document.activeElement;
    focused = element && element !== document.body && element.id ? {
      id: element.id,
      start: "selectionStart" in element ? element.selectionStart : null,
      end: "selectionEnd" in element ? element.selectionEnd : null,
    } : null;
  });

  document.addEventListener("htmx:wsAfterMessage", () => {
    const element = focused && document.getElementById(focused.id);
    if (element && element !== document.activeElement) {
      element.focus({ preventScroll: true });
      if (focused.start !== null && typeof element.setSelectionRange === "function") {
        element.setSelectionRange(focused.start, focused.end);
      }
    }
    focused = null;
  });
})();
