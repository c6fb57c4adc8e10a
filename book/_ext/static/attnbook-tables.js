// The reproduction page's claim table (book/_ext/attnbook_html.py): a filter box above it and headers that
// sort it when clicked; the header row stays in view while scrolling (attnbook.css).
document.addEventListener("DOMContentLoaded", () => {
  const page = document.querySelector("section#reproduction");
  if (!page) return;
  const tables = Array.from(page.querySelectorAll("table")).filter(t => t.rows.length > 20);
  for (const table of tables) {
    table.classList.add("attnbook-big-table");
    const body = table.tBodies[0];
    const box = document.createElement("input");
    box.type = "search";
    box.placeholder = "filter claims (chapter, word, verdict)";
    box.className = "attnbook-filter";
    box.addEventListener("input", () => {
      const q = box.value.toLowerCase();
      for (const row of body.rows) row.style.display = row.textContent.toLowerCase().includes(q) ? "" : "none";
    });
    table.parentNode.insertBefore(box, table);
    Array.from(table.tHead.rows[0].cells).forEach((th, col) => {
      th.style.cursor = "pointer";
      th.title = "sort by this column";
      th.addEventListener("click", () => {
        const rows = Array.from(body.rows);
        const dir = th.dataset.dir === "asc" ? -1 : 1;
        th.dataset.dir = dir === 1 ? "asc" : "desc";
        rows.sort((a, b) => dir * a.cells[col].textContent.localeCompare(b.cells[col].textContent, undefined,
                                                                           {numeric: true}));
        rows.forEach(r => body.appendChild(r));
      });
    });
  }
});
