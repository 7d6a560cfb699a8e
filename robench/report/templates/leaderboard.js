function compareCells(a, b) {
  if (a === b) return 0;
  const x = Number(a), y = Number(b);
  return (a !== "" && b !== "" && !isNaN(x) && !isNaN(y)) ? x - y : a.localeCompare(b);
}
document.querySelectorAll("table.board").forEach(function (table) {
  const headers = table.querySelectorAll("thead th");
  headers.forEach(function (th, col) {
    th.addEventListener("click", function () {
      // first click: ascending for the rank, descending (best first) for every other column
      const first = col === 0 ? "ascending" : "descending";
      const next = th.getAttribute("aria-sort") === first ? (first === "ascending" ? "descending" : "ascending")
        : first;
      const dir = next === "ascending" ? 1 : -1;
      headers.forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", next);
      const body = table.tBodies[0];
      const key = function (row) { return row.cells[col].dataset.sort; };
      Array.from(body.rows).sort(function (r, s) {
        const a = key(r), b = key(s);
        if (a === "" || b === "") return (a === "") - (b === "");  // missing values last either way
        return dir * compareCells(a, b);
      }).forEach(function (row) { body.appendChild(row); });
    });
  });
});
(function () {  // the task selector: one task at a time (every task shows without the script)
  const buttons = document.querySelectorAll("#tasks button");
  const show = function (slug) {
    document.querySelectorAll("section.task").forEach(function (s) { s.hidden = s.id !== "task-" + slug; });
    buttons.forEach(function (b) { b.setAttribute("aria-pressed", String(b.dataset.task === slug)); });
  };
  buttons.forEach(function (b) { b.addEventListener("click", function () { show(b.dataset.task); }); });
  if (buttons.length) show(buttons[0].dataset.task);
})();
