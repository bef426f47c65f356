/*
 * Keyboard of the adjudication page (no dependencies; the page works without it).
 *
 * - "1".."9" pick that final label (its button submits the form, as a click would).
 * - "a" moves to the note that marks the item genuinely ambiguous; Ctrl+Enter (or Cmd+Enter)
 *   there submits it.
 * - "n" opens the next undecided item of the list.
 * Keys typed into text fields, or pressed with Ctrl/Alt/Meta, are left alone.
 */
(() => {
  "use strict";

  const isTyping = (element) =>
    element instanceof HTMLElement && (element.isContentEditable ||
      ["TEXTAREA", "INPUT", "SELECT"].includes(element.tagName));

  function clickEnabled(control) {
    if (!control || control.matches(":disabled")) {
      return false;
    }
    control.click();
    return true;
  }

  document.addEventListener("keydown", (event) => {
    const form = document.querySelector("[data-adjudication-form]");
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) &&
        event.target instanceof HTMLElement && event.target.matches("[data-ambiguous-note]")) {
      event.preventDefault();
      event.target.form.requestSubmit(event.target.form.querySelector("[data-ambiguous]"));
      return;
    }
    if (event.defaultPrevented || event.repeat || event.ctrlKey || event.altKey ||
        event.metaKey || event.key.length !== 1 || isTyping(event.target)) {
      return;
    }
    const key = event.key.toLowerCase();
    let handled = false;
    if (form && /^[1-9]$/.test(key)) {
      handled = clickEnabled(form.querySelector(`[data-shortcut="${key}"]`));
    } else if (key === "a") {
      const note = document.querySelector("[data-ambiguous-note]");
      if (note) {
        note.focus();
        handled = true;
      }
    } else if (key === "n") {
      handled = clickEnabled(document.querySelector("[data-undecided]"));
    }
    if (handled) {
      event.preventDefault();
    }
  });

  /* After htmx swaps in the next item, focus its heading so Tab and screen readers start there. */
  document.addEventListener("htmx:afterSwap", (event) => {
    if (event.detail.target.id !== "workspace") {
      return;
    }
    const heading = event.detail.target.querySelector("[data-focus-after-swap]");
    if (heading) {
      heading.focus({ preventScroll: true });
    }
  });
})();
