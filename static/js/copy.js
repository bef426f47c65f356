// Copy buttons: <button type="button" data-copy="ID"> copies the value of the element with
// that id and says so. A delegated listener, so buttons swapped in by htmx work too (the
// Content-Security-Policy forbids inline handlers such as hx-on).
document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy]");
  const source = button && document.getElementById(button.dataset.copy);
  if (!source) {
    return;
  }
  navigator.clipboard.writeText(source.value).then(() => {
    button.textContent = "Copied";
  });
});
