"""The migration report: ``OUT/xpiler-report.json`` (every file's outcome, the totals) and
``OUT/xpiler-report.html``, one static page a team lead opens from disk — no server, no network: the data is
embedded, the table sorts by any column and filters by text and status, a row opens its diff (source →
output), and the totals say how many files ended how, for which reasons, and where the time went."""

from __future__ import annotations

import html
import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

from xpiler_core import __version__
from xpiler_core.safe_io import write_confined

REPORT_HTML = "xpiler-report.html"
REPORT_JSON = "xpiler-report.json"
STATUSES = ("verified", "compiled-not-executed", "unresolved", "error")


def reason_class(reason: str) -> str:
    """A reason without what is particular to one file (numbers, names in quotes, paths): files that ended
    for the same reason are counted together."""
    first = reason.split("\n", 1)[0]
    first = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", first)
    first = re.sub(r"(/[\w.+-]+)+", "…", first)
    first = re.sub(r"\d+(\.\d+)?", "N", first)
    first = re.sub(r"\(smallest failing case.*", "", first)
    return first.strip()[:120] or "(none)"


def summarize(files: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    statuses = Counter(str(f["status"]) for f in files)
    reasons = Counter(reason_class(str(f.get("reason") or "")) for f in files if f["status"] != "verified")
    phases: dict[str, float] = {"passes": 0.0, "compile": 0.0, "tests": 0.0, "other": 0.0}
    for f in files:
        timings = f.get("timings") or {}
        for phase in ("passes", "compile", "tests"):
            phases[phase] += float(timings.get(phase) or 0.0)
        # compile and tests run side by side: "checks" is their phase's wall time where the manifest has it
        checks = timings.get("checks")
        accounted = float(timings.get("passes") or 0.0) + (float(checks) if checks is not None else
                                                            float(timings.get("compile") or 0.0)
                                                            + float(timings.get("tests") or 0.0))
        phases["other"] += max(0.0, float(f.get("seconds") or 0.0) - accounted)
    ran = sum(1 for f in files if not f.get("reused"))
    return {"files": len(files), "ran": ran, "kept": len(files) - ran, "by_status": dict(statuses),
            "by_reason": reasons.most_common(), "time_by_phase": {k: round(v, 2) for k, v in phases.items()},
            "wall_s": round(wall_s, 1),
            "files_per_minute": round(60.0 * ran / wall_s, 2) if wall_s > 0 and ran else None}


def write_report(out_root: Path, root: Path, target: str, files: list[dict[str, Any]], copied: int,
                 skipped_links: list[str], executor: str, wall_s: float) -> tuple[Path, Path]:
    """Write both reports under ``out_root``; returns (html, json) paths."""
    rows = [{k: f.get(k) for k in ("relative", "status", "reason", "where", "tier", "seconds", "output", "node",
                                    "attempts", "diff", "timings", "reused")} for f in files]
    data = {"xpiler_version": __version__, "created": time.strftime("%Y-%m-%d %H:%M:%S"), "root": str(root),
            "output": str(out_root), "target": target, "executor": executor, "copied": copied,
            "skipped_links": skipped_links, "summary": summarize(files, wall_s), "files": rows}
    json_path = out_root / REPORT_JSON
    html_path = out_root / REPORT_HTML
    write_confined(json_path, json.dumps(data, indent=1, default=str), out_root)
    write_confined(html_path, render(data), out_root)
    return html_path, json_path


def render(data: dict[str, Any]) -> str:
    # the data goes in as JSON inside a script element: "</" can never end it early
    payload = json.dumps(data, default=str).replace("</", "<\\/")
    title = f"xpiler migration report: {html.escape(str(data['root']))} → {html.escape(str(data['target']))}"
    return _PAGE.replace("@TITLE@", title).replace("@DATA@", payload)


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>@TITLE@</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1b1f24}
h1{font-size:1.3em}h2{font-size:1.05em;margin-top:1.5em}
table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{cursor:pointer;background:#f4f6f8;user-select:none}th[aria-sort=ascending]::after{content:" ▲"}th[aria-sort=descending]::after{content:" ▼"}
tr.file{cursor:pointer}tr.file:hover{background:#f9fafb}
.verified{color:#116329}.unresolved{color:#9a6700}.compiled-not-executed{color:#0b5394}.error{color:#cf222e}
.bar{display:inline-block;height:12px;background:#4c78a8;vertical-align:middle}
pre.diff{background:#f6f8fa;padding:8px;overflow:auto;max-height:32em;margin:0}
.add{color:#116329}.del{color:#cf222e}.hunk{color:#6e7781}
#controls{margin:1em 0}#controls input{width:24em}
.totals span{margin-right:1.5em}
</style></head><body>
<h1 id="title"></h1><p id="meta"></p>
<div class="totals" id="totals"></div>
<h2>Reasons (files not verified)</h2><table id="reasons"><thead><tr><th>files</th><th>reason</th></tr></thead><tbody></tbody></table>
<h2>Where the time went</h2><div id="phases"></div>
<h2>Files</h2>
<div id="controls"><input id="filter" type="search" placeholder="filter: file, reason, tier…" aria-label="filter">
<select id="status" aria-label="status"><option value="">every status</option></select> <span id="shown"></span></div>
<table id="files"><thead><tr><th data-key="relative">file</th><th data-key="status">status</th>
<th data-key="reason">reason</th><th data-key="tier">tier</th><th data-key="seconds">seconds</th></tr></thead><tbody></tbody></table>
<script type="application/json" id="data">@DATA@</script>
<script>
"use strict";
const data = JSON.parse(document.getElementById("data").textContent);
const $ = (id) => document.getElementById(id);
const el = (tag, attrs, text) => { const e = document.createElement(tag); Object.assign(e, attrs || {});
  if (text !== undefined) e.textContent = text; return e; };
$("title").textContent = "Migration of " + data.root + " to " + data.target;
const s = data.summary;
$("meta").textContent = s.files + " file(s): " + s.ran + " translated in " + s.wall_s + " s (" +
  (s.files_per_minute ?? "-") + " files/min) on " + data.executor + ", " + s.kept +
  " unchanged since the last run (kept); " + data.copied + " other file(s) copied; " +
  data.skipped_links.length + " symbolic link(s) skipped; xpiler " + data.xpiler_version + ", " + data.created;
for (const [status, n] of Object.entries(s.by_status)) {
  const span = el("span", {className: status}, status + ": " + n); span.dataset.status = status; $("totals").append(span);
  $("status").append(el("option", {value: status}, status));
}
for (const [reason, n] of s.by_reason) { const tr = el("tr"); tr.append(el("td", {}, String(n)), el("td", {}, reason));
  $("reasons").tBodies[0].append(tr); }
if (!s.by_reason.length) { const tr = el("tr"); tr.append(el("td", {}, "0"), el("td", {}, "every file verified"));
  $("reasons").tBodies[0].append(tr); }
const total = Object.values(s.time_by_phase).reduce((a, b) => a + b, 0) || 1;
for (const [phase, secs] of Object.entries(s.time_by_phase)) {
  const row = el("div"); const bar = el("span", {className: "bar"}); bar.style.width = (400 * secs / total) + "px";
  row.append(el("span", {}, phase.padEnd(8, " ") + " "), bar, el("span", {}, " " + secs.toFixed(1) + " s"));
  $("phases").append(row);
}
let sortKey = "relative", sortDir = 1;
function renderDiff(text) {
  const pre = el("pre", {className: "diff"});
  for (const line of (text || "(no output)").split("\\n")) {
    const cls = line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : "";
    pre.append(el("span", {className: cls}, line + "\\n"));
  }
  return pre;
}
function draw() {
  const body = $("files").tBodies[0]; body.textContent = "";
  const needle = $("filter").value.toLowerCase(), wanted = $("status").value;
  const rows = data.files.filter(f => (!wanted || f.status === wanted) &&
    (!needle || [f.relative, f.reason, f.tier, f.status].join(" ").toLowerCase().includes(needle)));
  rows.sort((a, b) => { const x = a[sortKey] ?? "", y = b[sortKey] ?? "";
    return (typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y))) * sortDir; });
  for (const f of rows) {
    const tr = el("tr", {className: "file"}); tr.dataset.file = f.relative;
    tr.append(el("td", {}, f.relative), el("td", {className: f.status}, f.status),
              el("td", {}, (f.where ? f.where + ": " : "") + (f.reason || "").split("\\n")[0]),
              el("td", {}, f.tier || ""), el("td", {}, (f.seconds ?? 0).toFixed(2) + (f.reused ? " (kept)" : "")));
    tr.addEventListener("click", () => {
      const next = tr.nextElementSibling;
      if (next && next.classList.contains("diffrow")) { next.remove(); return; }
      const row = el("tr", {className: "diffrow"}); const td = el("td", {colSpan: 5});
      td.append(renderDiff(f.diff)); row.append(td); tr.after(row);
    });
    body.append(tr);
  }
  $("shown").textContent = rows.length + " of " + data.files.length + " shown";
}
for (const th of $("files").tHead.rows[0].cells) {
  th.addEventListener("click", () => {
    const key = th.dataset.key; sortDir = key === sortKey ? -sortDir : 1; sortKey = key;
    for (const other of th.parentNode.cells) other.removeAttribute("aria-sort");
    th.setAttribute("aria-sort", sortDir > 0 ? "ascending" : "descending"); draw();
  });
}
$("filter").addEventListener("input", draw); $("status").addEventListener("change", draw);
draw();
</script></body></html>
"""
