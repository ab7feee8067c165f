"""The page shell and its stylesheet, inline so the app needs no asset files on disk."""

from __future__ import annotations

CSS = """
body { margin: 0; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2328;
       background: #f6f7f9; font-size: 14px; }
nav { background: #24292f; padding: 10px 24px; display: flex; gap: 18px; align-items: center; }
nav a { color: #e6edf3; text-decoration: none; }
nav a.brand { font-weight: 700; font-size: 16px; }
main { max-width: 1400px; margin: 0 auto; padding: 16px 24px 48px; }
h1 { font-size: 22px; margin: 8px 0 6px; word-break: break-word; }
h3 { font-size: 15px; margin: 0 0 8px; }
.meta { color: #57606a; margin: 2px 0; }
.row { display: flex; gap: 16px; flex-wrap: wrap; margin: 12px 0; }
.row > .card { flex: 1 1 420px; }
.card { background: #fff; border: 1px solid #d0d7de; border-radius: 8px; padding: 14px 16px; margin: 12px 0; }
.row > .card { margin: 0; }
.chart { background: #fff; border: 1px solid #d0d7de; border-radius: 8px; padding: 6px; margin: 12px 0; }
.headline { font-size: 16px; }
.dim, .absent { color: #57606a; }
.absent { font-style: italic; margin: 4px 0; }
.warning { color: #9a6700; }
.live { color: #1a7f37; font-weight: 600; }
.badge { border-radius: 10px; padding: 1px 8px; font-size: 12px; font-weight: 600; background: #eaeef2; }
.status-running { background: #dafbe1; color: #1a7f37; }
.status-failed, .status-interrupted { background: #ffebe9; color: #cf222e; }
table.kv th { text-align: left; font-weight: 500; color: #57606a; padding: 2px 16px 2px 0; }
table.kv td { padding: 2px 0; }
table.grid { border-collapse: collapse; width: 100%; }
table.grid th, table.grid td { text-align: left; padding: 5px 10px; border-bottom: 1px solid #eaeef2; }
td.better { color: #1a7f37; font-weight: 600; } td.worse { color: #cf222e; font-weight: 600; }
.sev-critical { color: #cf222e; } .sev-warning { color: #9a6700; }
.saving { color: #1a7f37; }
a.disabled { pointer-events: none; color: #8c959f; }
.hint { color: #57606a; }
.tabs { display: flex; gap: 4px; margin: 6px 0 10px; border-bottom: 1px solid #d0d7de; }
.tabs a.tab { flex: 0 0 auto; padding: 6px 14px; color: #57606a; text-decoration: none; border: 1px solid transparent;
              border-bottom: none; border-radius: 6px 6px 0 0; }
.tabs a.tab.current { color: #1f2328; background: #fff; border-color: #d0d7de; font-weight: 600; }
.table { margin: 8px 0; --ag-font-size: 13px; }
.table .agGrid-Markdown p { margin: 0; }
"""

INDEX_STRING = """<!DOCTYPE html>
<html lang="en">
<head>
{%metas%}
<title>{%title%}</title>
{%favicon%}
{%css%}
<style>""" + CSS + """</style>
</head>
<body>
{%app_entry%}
<footer>
{%config%}
{%scripts%}
{%renderer%}
</footer>
</body>
</html>"""
