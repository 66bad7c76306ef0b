// Sorting and filtering for every <table class="data"> on the page, with no server and no library.
// The tables are complete without this script: it only adds the sort buttons and the filter box.
(function () {
  "use strict";

  // A cell sorts by its data-sort value when it has one (numbers, with "" for n/a), else by its text.
  function key(row, column) {
    var cell = row.cells[column];
    if (!cell) return "";
    return cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent.trim();
  }

  function compare(a, b) {
    if (a === "" || b === "") return a === b ? 0 : (a === "" ? 1 : -1); // n/a last
    var x = Number(a), y = Number(b);
    if (!isNaN(x) && !isNaN(y)) return x - y;
    return a.localeCompare(b, undefined, {numeric: true, sensitivity: "base"});
  }

  function sortBy(table, column, button) {
    var header = button.closest("th");
    var ascending = header.getAttribute("aria-sort") !== "ascending";
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (r, s) {
      var a = key(r, column), b = key(s, column);
      if (a === "" || b === "") return compare(a, b); // n/a stays last whichever way
      return ascending ? compare(a, b) : compare(b, a);
    });
    rows.forEach(function (row) { body.appendChild(row); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) { th.removeAttribute("aria-sort"); });
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  }

  function addFilter(table) {
    var box = document.createElement("input");
    box.type = "search";
    box.className = "filter";
    box.placeholder = "filter rows";
    box.setAttribute("aria-label", "filter the rows of the table below");
    var count = document.createElement("span");
    count.className = "count";
    var total = table.tBodies[0].rows.length;
    count.textContent = total + " rows";
    box.addEventListener("input", function () {
      var words = box.value.toLowerCase().split(/\s+/).filter(Boolean);
      var shown = 0;
      Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
        var text = row.textContent.toLowerCase();
        var keep = words.every(function (w) { return text.indexOf(w) >= 0; });
        row.hidden = !keep;
        if (keep) shown += 1;
      });
      count.textContent = shown + " of " + total + " rows";
    });
    var bar = document.createElement("div");
    bar.className = "tools";
    bar.appendChild(box);
    bar.appendChild(count);
    table.parentNode.insertBefore(bar, table);
  }

  function enhance(table) {
    if (!table.tHead || !table.tBodies.length) return;
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, column) {
      if (th.classList.contains("nosort")) return;
      var button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      while (th.firstChild) button.appendChild(th.firstChild);
      th.appendChild(button);
      button.addEventListener("click", function () { sortBy(table, column, button); });
    });
    if (table.tBodies[0].rows.length > 1) addFilter(table);
  }

  document.querySelectorAll("table.data").forEach(enhance);

  // A link to a closed <details> (a cell's predictions) opens it. Without this script the link still works:
  // browsers open a <details> when the address's fragment names an element inside it (its summary).
  function reveal(id) {
    var target = id && document.getElementById(id);
    for (var node = target; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
  }
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest('a[href^="#"]');
    if (link) reveal(decodeURIComponent(link.getAttribute("href").slice(1)));
  });
  window.addEventListener("hashchange", function () { reveal(decodeURIComponent(location.hash.slice(1))); });
  if (location.hash) reveal(decodeURIComponent(location.hash.slice(1)));
})();
