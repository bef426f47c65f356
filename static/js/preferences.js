/*
 * Keyboard answers on the pairwise comparison page (no dependencies; the page works without it).
 *
 * ArrowLeft: A is better, ArrowRight: B is better, "=": equal (when the question allows ties),
 * "u": undo the latest answer (its pair comes back; press again to go further back).
 * Keys pressed in text fields or with Ctrl/Alt/Meta are left alone, and keys pressed while an
 * answer is on its way are dropped. The buttons are clicked, so htmx sends the chosen outcome
 * exactly as with the mouse.
 */
(() => {
  "use strict";

  const KEYS = new Set(["ArrowLeft", "ArrowRight", "=", "u"]);

  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.repeat || event.ctrlKey || event.altKey ||
        event.metaKey || !KEYS.has(event.key)) {
      return;
    }
    const target = event.target;
    if (target instanceof HTMLElement &&
        (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) {
      return;
    }
    // While htmx sends an answer or settles the next pair in, keys wait: a click then
    // could hit a form htmx has not taken over yet and reload the page.
    if (document.querySelector(".htmx-request, .htmx-swapping, .htmx-settling")) {
      event.preventDefault();
      return;
    }
    const button = document.querySelector(
      `[data-compare-form] button[data-key="${event.key}"], [data-undo-form] button[data-key="${event.key}"]`,
    );
    if (button && !button.matches(":disabled")) {
      event.preventDefault();
      button.click();
    }
  });

  /* After htmx swaps in the next pair, move focus to its heading (screen readers, Tab). */
  document.addEventListener("htmx:afterSwap", (event) => {
    if (event.detail.target.id !== "pair-area") {
      return;
    }
    const heading = event.detail.target.querySelector("[data-focus-after-swap]");
    if (heading) {
      heading.focus({ preventScroll: true });
    }
  });
})();
