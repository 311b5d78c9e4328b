"""The report page's inline assets: its style sheet, the few lines of script that sort a table
by a clicked header, and the Content-Security-Policy that forbids every fetch (the page is
self-contained: nothing is loaded from anywhere)."""

from __future__ import annotations

__all__ = ["STYLE", "SORT_SCRIPT", "CSP"]

STYLE = """
:root { color-scheme: light; --ink: #1d2330; --muted: #5b6473; --line: #d9dee7; --head: #f2f4f8; --accent: #2f5fa7; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--ink); background: #fff; }
header, main, footer { max-width: 1200px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 20px; border-bottom: 1px solid var(--line); }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 32px 0 8px; padding-top: 8px; border-top: 2px solid var(--accent); }
h3 { font-size: 16px; margin: 22px 0 4px; }
h4 { font-size: 14px; margin: 16px 0 4px; }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; }
p { margin: 6px 0; }
.note, .missing { color: var(--muted); }
.notes { background: #fff7e0; border: 1px solid #f0d68a; padding: 6px 12px 6px 28px; }
.scroll { overflow-x: auto; margin: 8px 0 14px; }
table { border-collapse: collapse; font-size: 13px; }
p.caption { color: var(--muted); margin: 12px 0 4px; }
.tablebox .scroll { margin-top: 0; }
th, td { border: 1px solid var(--line); padding: 4px 8px; vertical-align: top; text-align: left; }
th { background: var(--head); font-weight: 600; vertical-align: bottom; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th::after { content: "\\00a0\\2195"; color: #a9b1bf; font-weight: 400; }
table.sortable th[aria-sort="ascending"]::after { content: "\\00a0\\2191"; color: var(--accent); }
table.sortable th[aria-sort="descending"]::after { content: "\\00a0\\2193"; color: var(--accent); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; }
td.text { min-width: 220px; max-width: 520px; }
td.path { word-break: break-all; max-width: 280px; }
td.token { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
code.sig { font-size: 11px; overflow-wrap: anywhere; color: #3b4252; background: #f5f6f8; padding: 1px 3px; }
td.sigcell code.sig { display: inline-block; min-width: 20em; max-width: 34em; }
ol.refs, ul.ents { margin: 0; padding-left: 18px; }
ol.refs li.best { font-weight: 600; }
.tiles { display: flex; flex-wrap: wrap; gap: 0 28px; align-items: flex-start; }
summary { cursor: pointer; color: var(--accent); margin: 10px 0; }
.sides { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
.sides .scroll { max-height: 24em; overflow-y: auto; margin-top: 0; }
.pair { background: #f7f8fa; padding: 6px 10px; border-left: 3px solid var(--accent); }
figure { margin: 10px 0 18px; }
figure svg { max-width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 12px; }
footer { color: var(--muted); font-size: 12px; padding: 24px; border-top: 1px solid var(--line); margin-top: 32px; }
"""

# Sorting by a click on a column's header (Enter too): by data-value where the cell has a number,
# else by text; cells without a value last either way; ties keep their order.
SORT_SCRIPT = """
(function () {
  function key(cell) {
    var v = cell ? cell.getAttribute('data-value') : null;
    if (v === '') return [2, 0];
    if (v !== null && !isNaN(Number(v))) return [0, Number(v)];
    return [1, cell ? cell.textContent.trim().toLowerCase() : ''];
  }
  function sort(th) {
    var table = th.closest('table'), body = table.tBodies[0], col = th.cellIndex;
    var dir = th.getAttribute('aria-sort') === 'ascending' ? -1 : 1;
    table.querySelectorAll('thead th').forEach(function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', dir === 1 ? 'ascending' : 'descending');
    Array.prototype.map.call(body.rows, function (row, i) { return [key(row.cells[col]), i, row]; })
      .sort(function (a, b) {
        if (a[0][0] !== b[0][0]) return a[0][0] - b[0][0];
        var c = a[0][1] < b[0][1] ? -1 : a[0][1] > b[0][1] ? 1 : 0;
        return c * dir || a[1] - b[1];
      })
      .forEach(function (item) { body.appendChild(item[2]); });
  }
  document.querySelectorAll('table.sortable thead th').forEach(function (th) {
    th.tabIndex = 0;
    th.addEventListener('click', function () { sort(th); });
    th.addEventListener('keydown', function (e) { if (e.key === 'Enter') sort(th); });
  });
})();
"""

# Nothing may be fetched: no network, no other file; inline style and script only.
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
