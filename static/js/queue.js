/*
 * Keyboard shortcuts of the annotator queue (no dependencies; the page works without it).
 *
 * - A label's shortcut picks that label in the current question (the first unanswered one).
 *   With one question the label button submits at once; with several, the next unanswered
 *   question becomes current, and the answers are submitted once every question has one.
 * - "s" skips the item, "u" undoes the last answer.
 * Keys typed into text fields, or pressed with Ctrl/Alt/Meta, are left alone. Controls are
 * activated with click() so htmx sees which button submitted the form, as with a mouse.
 */
(() => {
  "use strict";

  const TYPING_INPUTS = new Set(["text", "search", "email", "url", "tel", "password", "number",
    "date", "datetime-local", "month", "time", "week"]);

  const isTyping = (element) =>
    element instanceof HTMLElement && (
      element.isContentEditable ||
      element.tagName === "TEXTAREA" ||
      element.tagName === "SELECT" ||
      (element.tagName === "INPUT" && TYPING_INPUTS.has(element.type)));

  const questionsOf = (form) => [...form.querySelectorAll("[data-question]")];
  const isAnswered = (question) => question.querySelector("input:checked") !== null;

  /* Mark the first unanswered question as current (when there are several) and return it. */
  function markCurrent(form) {
    const questions = questionsOf(form);
    const current = questions.find((question) => !isAnswered(question));
    for (const question of questions) {
      if (questions.length > 1 && question === current) {
        question.setAttribute("aria-current", "step");
      } else {
        question.removeAttribute("aria-current");
      }
    }
    return current;
  }

  function shortcutIn(container, key) {
    return [...container.querySelectorAll("[data-shortcut]")].find((control) =>
      control.dataset.shortcut.toLowerCase() === key && !control.matches(":disabled"));
  }

  function clickIfEnabled(selector) {
    const control = document.querySelector(selector);
    if (!control || control.matches(":disabled")) {
      return false;
    }
    control.click();
    return true;
  }

  function pickLabel(form, key) {
    const questions = questionsOf(form);
    const question = markCurrent(form) || questions[questions.length - 1];
    const choice = question && shortcutIn(question, key);
    if (!choice) {
      return false;
    }
    if (choice.type === "radio") {
      choice.checked = true;
      if (!markCurrent(form)) {
        form.querySelector("[data-submit]").click();
      }
    } else {
      choice.click();
    }
    return true;
  }

  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.repeat || event.ctrlKey || event.altKey ||
        event.metaKey || event.key.length !== 1 || isTyping(event.target)) {
      return;
    }
    const key = event.key.toLowerCase();
    const form = document.querySelector("[data-queue-form]");
    const handled = (form !== null && pickLabel(form, key)) ||
      (key === "s" && clickIfEnabled("[data-skip]")) ||
      (key === "u" && clickIfEnabled("[data-undo]"));
    if (handled) {
      event.preventDefault();
    }
  });

  /* Answering with the mouse moves the current question along too. */
  document.addEventListener("change", (event) => {
    const form = event.target.closest && event.target.closest("[data-queue-form]");
    if (form) {
      markCurrent(form);
    }
  });

  function prepare(root) {
    const form = root.querySelector("[data-queue-form]");
    if (form) {
      markCurrent(form);
    }
  }

  document.addEventListener("DOMContentLoaded", () => prepare(document));

  /* After htmx swaps in the next item, focus it so screen readers and Tab start there. */
  document.addEventListener("htmx:afterSwap", (event) => {
    const area = event.detail.target;
    if (area.id !== "item-area") {
      return;
    }
    prepare(area);
    const heading = area.querySelector("[data-focus-after-swap]");
    if (heading) {
      heading.focus({ preventScroll: true });
    }
  });
})();
