/*
 * Keyboard shortcuts of the annotator queue (no dependencies; the page works without it).
 *
 * - A label's shortcut picks that label in the current question (the first unanswered one).
 *   With one question the label button submits at once; with several, the next unanswered
 *   question becomes current, and the answers are submitted once every question has one.
 * - "s" skips the item, "u" undoes the last answer.
 * - A key pressed while the next item loads is not applied to an item the annotator has not
 *   seen: a notice says it was ignored.
 * - The instructions fold once the first answer is in, and stay open or folded as the
 *   annotator left them (remembered per user and study in localStorage).
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

  let noticeTimer = 0;

  /* Say that a key press was ignored because the next item is still loading. */
  function sayIgnored(key) {
    const notice = document.querySelector("[data-key-notice]");
    if (!notice) {
      return;
    }
    notice.textContent = `“${key}” ignored: the next item is loading. Press again once it shows.`;
    notice.hidden = false;
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(() => (notice.hidden = true), 2500);
  }

  const isLoading = (form) => form.querySelector(".answer-form__controls:disabled") !== null;

  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.repeat || event.ctrlKey || event.altKey ||
        event.metaKey || event.key.length !== 1 || isTyping(event.target)) {
      return;
    }
    const key = event.key.toLowerCase();
    const form = document.querySelector("[data-queue-form]");
    if (form !== null && isLoading(form) && shortcutIn(form, key) === undefined &&
        form.querySelector(`[data-shortcut="${CSS.escape(key)}" i]`) !== null) {
      event.preventDefault();
      sayIgnored(event.key);
      return;
    }
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

  /* The instructions: as the annotator last left them, else the page's default. */
  function rememberInstructions() {
    const details = document.querySelector("details[data-remember]");
    if (!details) {
      return;
    }
    const saved = localStorage.getItem(details.dataset.remember);
    if (saved !== null) {
      details.open = saved === "open";
    }
    details.querySelector("summary").addEventListener("click", () => {
      // The click toggles after this handler: store the state it leads to.
      localStorage.setItem(details.dataset.remember, details.open ? "closed" : "open");
    });
  }

  /* Fold the instructions after the first answer unless the annotator chose to keep them. */
  function foldInstructions() {
    const details = document.querySelector("details[data-remember]");
    if (details && localStorage.getItem(details.dataset.remember) === null) {
      details.open = false;
      localStorage.setItem(details.dataset.remember, "closed");
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    rememberInstructions();
    prepare(document);
  });

  /* After htmx swaps in the next item, focus it so screen readers and Tab start there. */
  document.addEventListener("htmx:afterSwap", (event) => {
    const area = event.detail.target;
    if (area.id !== "item-area") {
      return;
    }
    prepare(area);
    const notice = document.querySelector("[data-key-notice]");
    if (notice) {
      notice.hidden = true;
    }
    if (event.detail.requestConfig && event.detail.requestConfig.verb === "post") {
      foldInstructions();
    }
    const heading = area.querySelector("[data-focus-after-swap]");
    if (heading) {
      heading.focus({ preventScroll: true });
    }
  });
})();
