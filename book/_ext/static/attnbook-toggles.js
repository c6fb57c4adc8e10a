// The book's sidebar buttons (book/_ext/attnbook_html.py): the themes bind the first .primary-toggle and
// .secondary-toggle (hidden in sphinx-book-theme 1.3); the visible ones forward their clicks to it.
document.addEventListener("DOMContentLoaded", () => {
  for (const cls of [".primary-toggle", ".secondary-toggle"]) {
    const buttons = Array.from(document.querySelectorAll(cls));
    const bound = buttons[0];
    for (const b of buttons.slice(1)) {
      b.addEventListener("click", (e) => {
        e.preventDefault();
        e.stopPropagation();
        bound.click();
      });
    }
  }
});
