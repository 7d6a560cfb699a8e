(function () {
  const rows = Array.from(document.querySelectorAll("#examples tbody tr"));
  const shown = document.getElementById("shown");
  document.querySelectorAll("#filter input[name=outcome]").forEach(function (input) {
    input.addEventListener("change", function () {
      let count = 0;
      rows.forEach(function (row) {
        const visible = input.value === "all" || row.dataset.outcome === input.value;
        row.hidden = !visible;
        count += visible;
      });
      shown.textContent = count + " shown";
    });
  });
})();
