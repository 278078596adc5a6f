"""The results site: one self-contained page with every study's figures, their
headline numbers and the capacity planner (``results/site/index.html``).

The page needs no network: style and script are inline, the figures are PNG
files beside it. The headline lines are each experiment's ``SUMMARY`` filled
with the same values the paper prints; a study may add a table of its points
(its post module's ``panel``). The planner evaluates the formula
strings of :mod:`kernbench.capacity.formulas` -- the ones ``kernbench capacity``
evaluates -- with the chip, model and efficiency data embedded as JSON, so the
two cannot disagree; axis C from the ``llm`` study's simulated steps follows
:mod:`kernbench.capacity.steps` line by line in the script.
"""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

from kernbench.capacity.formulas import FORMULAS
from kernbench.capacity.planner import AXES, Chip, Efficiency, quantities
from kernbench.models import PRESETS, load_model

# what each input symbol means, for the legend
SYMBOLS = {
    "layers": "transformer layers", "hidden": "hidden size", "heads": "query heads",
    "kv_heads": "KV heads", "d_head": "head dimension", "ffn": "FFN inner size",
    "b": "bytes per weight and KV element", "hbm_pe": "HBM bytes per PE",
    "bw_pe": "HBM bandwidth per PE (bytes/s)", "system_pes": "PEs in one system",
    "context": "tokens of context per user", "users": "concurrent users",
    "tpot": "time-per-output-token target (s)",
    "eff": "decode attention efficiency measured by the attention study (bound / latency)",
}


def planner_data(chips: list[Chip], eff: Efficiency | None, steps: dict | None = None) -> dict:
    """What the planner's script reads; ``steps`` are the llm study's simulated decode
    steps (``capacity.steps.site_grids``), the source of axis C when they cover the
    model, chip and context, as in ``kernbench capacity``."""
    return {
        "steps": steps or {"table": "", "grids": {}},
        "models": {k: quantities(load_model(k)) for k in PRESETS},
        "chips": {c.name: {"hbm_pe": c.hbm_pe, "bw_pe": c.bw_pe, "system_pes": c.system_pes}
                  for c in chips},
        "eff": [[c, e, w] for c, e, w in eff.points] if eff else [],
        "formulas": [[n, expr, unit, meaning] for n, (expr, unit, meaning) in FORMULAS.items()],
        "axes": [[k, title, list(members)] for k, (title, members) in AXES.items()],
        "symbols": SYMBOLS,
    }


def study_panels(tables: dict[str, str | Path]) -> list[tuple[str, list[str], list[list[str]]]]:
    """Each experiment's table panel (its post module's ``panel(table) -> (title, header,
    rows)``, for those that have one and whose table exists), in paper order."""
    from kernbench.experiments.registry import ordered
    from kernbench.report.context import load_table

    out = []
    for exp in ordered([n for n, t in tables.items() if Path(t).exists()]):
        post = exp.post_module()
        if hasattr(post, "panel"):
            out.append(post.panel(load_table(post, tables[exp.name])))
    return out


def _panel_html(title: str, header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<h3>{html.escape(title)}</h3><table><tr>{head}</tr>{body}</table>"


def build(out_dir: str | Path, title: str, summaries: dict[str, list[str]],
          figures: list[tuple[str, str]], data: dict,
          panels: list[tuple[str, list[str], list[list[str]]]] = ()) -> Path:
    """Write ``index.html`` and copy the figures (``(png path, caption)``) beside it;
    ``panels`` are the studies' tables (:func:`study_panels`)."""
    out = Path(out_dir)
    (out / "fig").mkdir(parents=True, exist_ok=True)
    cards = []
    for png, caption in figures:
        name = Path(png).name
        shutil.copyfile(png, out / "fig" / name)
        cards.append(f'<figure><img src="fig/{html.escape(name)}" alt="{html.escape(name)}">'
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    heads = "".join(
        f"<h3>{html.escape(exp)}</h3><ul>"
        + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>"
        for exp, lines in summaries.items())
    tables = "".join(_panel_html(*p) for p in panels)
    if tables:
        tables = "<h2>Study tables</h2>" + tables
    page = (_PAGE.replace("@TITLE@", html.escape(title))
            .replace("@HEADLINES@", heads + tables)
            .replace("@FIGURES@", "\n".join(cards))
            .replace("@DATA@", json.dumps(data, sort_keys=True).replace("</", "<\\/"))
            .replace("@SCRIPT@", _SCRIPT))
    path = out / "index.html"
    path.write_text(page)
    return path


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>@TITLE@</title>
<style>
body{font-family:system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1em;color:#222}
h1{font-size:1.5em} h2{border-bottom:1px solid #ccc;margin-top:1.6em}
figure{display:inline-block;width:48%;margin:0.5%;vertical-align:top}
figure img{width:100%} figcaption{font-size:0.85em;color:#444}
table{border-collapse:collapse;width:100%;font-size:0.9em}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
td.v{font-family:monospace;white-space:nowrap} code{font-size:0.9em}
.controls label{display:inline-block;margin:0 1.2em 0.6em 0}
#error{color:#a00;font-weight:bold}
</style></head><body>
<h1>@TITLE@</h1>
<h2>Headline numbers</h2>
@HEADLINES@
<h2>Capacity planner</h2>
<div class="controls">
<label>model <select id="model"></select></label>
<label>chip (topology) <select id="chip"></select></label><br>
<label>context <input id="context" type="range"> <span id="context_v"></span> tokens</label>
<label>users <input id="users" type="range" min="0" max="5" step="0.01">
<span id="users_v"></span></label>
<label>time per token <input id="tpot" type="range" min="1" max="200" step="1">
<span id="tpot_v"></span> ms</label>
</div>
<p id="error"></p>
<p id="effsource"></p>
<h3>Symbols</h3>
<table id="legend"><tr><th>symbol</th><th>in plain English</th><th>value now</th></tr></table>
<h3>The three axes</h3>
<table id="axes"><tr><th>in symbols</th><th>in plain English</th><th>what it says</th>
<th>value now</th></tr></table>
<h3>Axis C from simulated steps</h3>
<p id="simsource"></p>
<table id="simaxis"><tr><th>rule</th><th>in plain English</th><th>what it says</th>
<th>value now</th></tr></table>
<h2>Figures</h2>
@FIGURES@
<script id="data" type="application/json">@DATA@</script>
<script>@SCRIPT@</script>
</body></html>
"""

_SCRIPT = r"""
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const F = {ceil: Math.ceil, floor: Math.floor, min: Math.min, max: Math.max};
function evaluate(expr, env) {  // the shared formula syntax: arithmetic and F
  const names = Object.keys(env);
  const fn = new Function("F", ...names, "const {ceil, floor, min, max} = F; return (" + expr + ");");
  return fn(F, ...names.map(n => env[n]));
}
function fmt(x) {  // as kernbench.capacity.planner.fmt
  if (Number.isInteger(x) && Math.abs(x) < 1e15) return String(x);
  const a = Math.abs(x);
  if (a >= 1e-3 && a < 1e6) return x.toFixed(Math.max(0, 3 - Math.floor(Math.log10(a))));
  return x.toExponential(3);
}
function effAt(ctx) {  // as Efficiency.at: linear between measured points, never beyond
  const p = D.eff;
  if (!p.length) throw new Error("no attention-study points: build results/tables/gqa.csv");
  if (ctx < p[0][0] || ctx > p[p.length - 1][0])
    throw new Error("context " + ctx + ": outside the measured decode range " + p[0][0] +
                    ".." + p[p.length - 1][0] + " tokens; the planner does not extrapolate");
  for (let i = 0; i < p.length; i++) {
    if (ctx === p[i][0]) return [p[i][1], "measured at " + p[i][0] + " tokens (" + p[i][2] + ")"];
    if (i + 1 < p.length && p[i][0] < ctx && ctx < p[i + 1][0]) {
      const e = p[i][1] + (p[i + 1][1] - p[i][1]) * (ctx - p[i][0]) / (p[i + 1][0] - p[i][0]);
      return [e, "interpolated between " + p[i][0] + " and " + p[i + 1][0] + " tokens (" +
              p[i][2] + "; " + p[i + 1][2] + ")"];
    }
  }
}
function bracket(values, x, what) {  // as StepTimes._bracket
  if (x < values[0] || x > values[values.length - 1])
    throw new RangeError(what + " " + x + " is outside the simulated " + values[0] + ".." +
                         values[values.length - 1]);
  const i = values.findIndex(u => u >= x);
  return values[i] === x ? [x, x] : [values[i - 1], values[i]];
}
function sorted(xs) { return [...new Set(xs)].sort((a, b) => a - b); }
function stepAt(grid, batch, ctx) {  // as StepTimes.at: bilinear, never beyond the grid
  const [b0, b1] = bracket(sorted(grid.map(p => p[0])), batch, "batch");
  const [c0, c1] = bracket(sorted(grid.map(p => p[1])), ctx, "context");
  const g = new Map(grid.map(p => [p[0] + "," + p[1], p[2]]));
  const corners = [];
  for (const b of sorted([b0, b1])) for (const c of sorted([c0, c1])) corners.push([b, c]);
  const gone = corners.find(([b, c]) => !g.has(b + "," + c));
  if (gone) throw new RangeError("the simulated grid lacks batch " + gone[0] + " at context " +
                                 gone[1]);
  const at = (b, c) => g.get(b + "," + c);
  const fb = b1 === b0 ? 0 : (batch - b0) / (b1 - b0), fc = c1 === c0 ? 0 : (ctx - c0) / (c1 - c0);
  const low = at(b0, c0) + (at(b1, c0) - at(b0, c0)) * fb;
  const high = at(b0, c1) + (at(b1, c1) - at(b0, c1)) * fb;
  return [low + (high - low) * fc, corners];
}
function g6(x) { return String(Number(x.toPrecision(6))); }  // Python's "{:g}" here
function simulatedAxis(v, grid, table) {  // as capacity.steps.axis_c
  const bs = sorted(grid.map(p => p[0]));
  const fit = Math.floor((v.system_pes * v.hbm_pe - v.W) / (v.kv_bpt * v.context));
  let best = 0;
  for (let b = bs[0]; b <= Math.min(bs[bs.length - 1], fit); b++) {
    try { if (stepAt(grid, b, v.context)[0] <= v.tpot) best = b; }
    catch (err) { if (!(err instanceof RangeError)) throw err; }
  }
  if (!best) return {unavailable: "no simulated batch in " + bs[0] + ".." + bs[bs.length - 1] +
                     " meets " + g6(v.tpot * 1e3) + " ms at " + v.context + " tokens (" +
                     table + ")"};
  const [t, pts] = stepAt(grid, best, v.context);
  const cite = pts.map(([b, c]) => "(batch " + b + ", context " + c + ")").join(", ");
  const systems = Math.ceil(v.users / best);
  return {steps: [
    ["batch", "largest batch <= min(simulated, KV fit) with t_step(batch) <= tpot",
     "batch one system serves, from the simulated decode steps",
     "t_step(" + best + ") <= " + g6(v.tpot * 1e3) + " ms < t_step(" + (best + 1) +
     ") or the limit " + fit, best, "users"],
    ["t_step", "bilinear in batch and context between simulated steps",
     "simulated decode step time at that batch", "from " + cite + " of " + table, t, "s"],
    ["systems", "ceil(users / batch)", "systems of this topology, each serving one batch",
     "ceil(" + v.users + " / " + best + ")", systems, "systems"]]};
}
function showSimulated(v) {
  const table = el("simaxis"), grid = ((D.steps.grids[el("model").value] || {})
                                       [el("chip").value]);
  clear(table);
  if (!grid) { el("simsource").textContent = "no simulated decode steps of this model on " +
               "this chip (the llm study's table): axis C above is the efficiency estimate";
               return; }
  const c = simulatedAxis(v, grid, D.steps.table);
  el("simsource").textContent = c.unavailable ? "unavailable: " + c.unavailable :
      "from the llm study's simulated decode steps (kernbench capacity's axis C)";
  for (const [n, rule, meaning, said, value, unit] of c.steps || [])
    row(table, [rule, meaning, said, fmt(value) + " " + unit], "sim-" + n);
}
function inputs() {
  const m = D.models[el("model").value], c = D.chips[el("chip").value];
  const users = Math.round(Math.pow(10, Number(el("users").value)));
  return Object.assign({}, m, c, {context: Number(el("context").value), users: users,
                                  tpot: Number(el("tpot").value) / 1e3});
}
function el(id) { return document.getElementById(id); }
function substitute(expr, v) {
  return expr.replace(/\b[A-Za-z_][A-Za-z_0-9]*\b/g, n => (n in v) ? fmt(v[n]) : n);
}
function row(table, cells, id) {
  const tr = document.createElement("tr");
  if (id) tr.id = id;
  cells.forEach((c, i) => { const td = document.createElement("td"); td.textContent = c;
                            if (i === cells.length - 1) td.className = "v"; tr.appendChild(td); });
  table.appendChild(tr);
}
function clear(table) { while (table.rows.length > 1) table.deleteRow(1); }
function update() {
  const v = inputs();
  el("context_v").textContent = v.context; el("users_v").textContent = v.users;
  el("tpot_v").textContent = v.tpot * 1e3;
  const legend = el("legend"), axes = el("axes");
  clear(legend); clear(axes); el("error").textContent = ""; el("effsource").textContent = "";
  try {
    const [e, how] = effAt(v.context);
    v.eff = e;
    el("effsource").textContent = "eff = " + e.toFixed(4) + ", " + how;
    for (const [n, expr] of D.formulas) v[n] = evaluate(expr, v);
  } catch (err) { el("error").textContent = err.message; return; }
  for (const [n, text] of Object.entries(D.symbols)) row(legend, [n, text, fmt(v[n])], "sym-" + n);
  const byName = Object.fromEntries(D.formulas.map(f => [f[0], f]));
  for (const [key, title, members] of D.axes) {
    row(axes, [key + ". " + title, "", "", ""]);
    for (const n of members) {
      const [, expr, unit, meaning] = byName[n];
      row(axes, [n + " = " + expr, meaning, substitute(expr, v), fmt(v[n]) + " " + unit],
          "ax-" + n);
    }
  }
  showSimulated(v);
  if (v.pes > v.system_pes) el("error").textContent = "the model fits no replica of this chip";
  else if (v.users_kv < 1) el("error").textContent = "one user's KV cache does not fit a replica";
  else if (v.batch_tpot < 1) el("error").textContent = "no batch meets the time-per-token target";
}
function byName(a, b) {  // "llama3-8b" before "llama3-70b", "default" first
  return a.localeCompare(b, "en", {numeric: true});
}
function init() {
  for (const k of Object.keys(D.models).sort(byName)) el("model").add(new Option(k, k));
  for (const k of Object.keys(D.chips).sort(byName)) el("chip").add(new Option(k, k));
  const ctx = el("context");
  if (D.eff.length) { ctx.min = D.eff[0][0]; ctx.max = D.eff[D.eff.length - 1][0]; }
  ctx.step = 1024; ctx.value = ctx.min;
  el("users").value = 3; el("tpot").value = 50;
  for (const id of ["model", "chip", "context", "users", "tpot"])
    el(id).addEventListener("input", update);
  update();
}
init();
"""
