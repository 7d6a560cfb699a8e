function compareCells(a, b) {
  if (a === b) return 0;
  const x = Number(a), y = Number(b);
  return (a !== "" && b !== "" && !isNaN(x) && !isNaN(y)) ? x - y : a.localeCompare(b);
}
document.querySelectorAll("table.board").forEach(function (table) {
  const headers = table.querySelectorAll("thead th");
  headers.forEach(function (th, col) {
    th.addEventListener("click", function () {
      const dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
      headers.forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
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
