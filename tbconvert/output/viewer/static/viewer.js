// The viewer's page: the runs table, the legend and one chart per scalar tag, drawn with
// plotly.js.  Names from the store are data: they reach the DOM through textContent and
// plotly through escapeForPlotly (plotly reads a few HTML tags in its labels).
"use strict";

const TBV = (window.TBV = window.TBV || {});
// ms since navigation: plotly.js run, the first chart's answer, the first chart drawn.
TBV.timing = {};
const PALETTE = [
  "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
  "#bcbd22", "#17becf", "#393b79", "#ad494a", "#637939", "#8c6d31", "#843c39", "#7b4173",
  "#3182bd", "#e6550d", "#31a354", "#756bb1",
];
const DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"];
const MANY_RUNS = 50;
const DEFAULT_RUNS = 10;
// The plot area's left and right margins (layout below): the chart asks for one bucket per pixel
// column between them.
const MARGIN = { l: 50, r: 10, t: 28, b: 40 };

// plotly.js loads async (index.html), so the first requests leave while it is parsed.
const plotlyReady = window.Plotly ? Promise.resolve() : new Promise((resolve, reject) => {
  const script = document.getElementById("plotly-js");
  script.addEventListener("load", () => { TBV.timing.plotly = performance.now(); resolve(); });
  script.addEventListener("error", () => reject(new Error("static/plotly.min.js did not load")));
});
TBV.plotlyReady = plotlyReady;
if (window.Plotly) TBV.timing.plotly = performance.now(); // it ran before this script

// "1 line", "2 lines".
function counted(number, noun) {
  return `${number} ${noun}${number === 1 ? "" : "s"}`;
}

// The smoothing of `tbconvert plot` (tbconvert/output/plot.py, smooth): TensorBoard's
// debiased exponential moving average; non-finite values kept and left out of the average,
// a constant series unchanged.
function smooth(values, weight) {
  if (values.every((value) => value === values[0])) return values.slice();
  let last = 0;
  let accumulated = 0;
  return values.map((value) => {
    if (value === null || !Number.isFinite(value)) return value;
    last = last * weight + (1 - weight) * value;
    accumulated += 1;
    const debias = weight === 1 ? 1 : 1 - Math.pow(weight, accumulated);
    return last / debias;
  });
}
TBV.smooth = smooth;

function escapeForPlotly(name) {
  return String(name).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

// A tag filter: a glob when it has * ? or [, else a case-insensitive substring.
function tagMatcher(filter) {
  const text = filter.trim();
  if (!text) return () => true;
  if (!/[*?[]/.test(text)) return (tag) => tag.toLowerCase().includes(text.toLowerCase());
  const pattern = text.replace(/[.+^${}()|\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
  const regex = new RegExp(`^(?:${pattern})$`);
  return (tag) => regex.test(tag);
}

// ---------------------------------------------------------------- where the data comes from
const serverSource = {
  async get(path, parameters, early = null) {
    const response = await (early || fetch(`api/${path}?${parameters}`));
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  },
  overview() {
    const early = window.TBV_OVERVIEW; // index.html's, taken once
    window.TBV_OVERVIEW = null;
    return this.get("overview.json", new URLSearchParams(), early);
  },
  chart(tag, runIds, x, range, buckets) {
    const query = new URLSearchParams({ tag, runs: runIds.join(","), x, buckets });
    if (range) { query.set("low", range[0]); query.set("high", range[1]); }
    return this.get("chart.json", query);
  },
  groups(tag, runIds, by, over, band) {
    const query = new URLSearchParams({ tag, runs: runIds.join(","), band });
    by.forEach((key) => query.append("by", key));
    over.forEach((key) => query.append("over", key));
    return this.get("groups.json", query);
  },
};

// ---------------------------------------------------------------- the view and the URL
const view = {
  selected: null, // Set of run paths; null: every run
  hidden: new Set(),
  tags: "",
  x: "step",
  smoothing: 0,
  by: [],
  over: [],
  band: "std",
  metric: "last",
  filter: "",
  sort: null, // [column, "asc" | "desc"]
  zoom: {}, // tag -> [low, high]
};

function readUrl() {
  const query = new URLSearchParams(location.hash.slice(1));
  view.selected = query.has("run") ? new Set(query.getAll("run")) : null;
  view.hidden = new Set(query.getAll("hide"));
  view.tags = query.get("tags") || "";
  view.x = ["step", "relative", "wall"].includes(query.get("x")) ? query.get("x") : "step";
  view.smoothing = Math.min(0.99, Math.max(0, Number(query.get("smooth")) || 0));
  view.by = query.getAll("by");
  view.over = query.getAll("over");
  view.band = query.get("band") || "std";
  view.metric = query.get("metric") || "last";
  view.filter = query.get("filter") || "";
  const sort = query.get("sort");
  view.sort = sort ? [sort.replace(/^-/, ""), sort.startsWith("-") ? "desc" : "asc"] : null;
  view.zoom = {};
  for (const entry of query.getAll("zoom")) {
    const cut = entry.lastIndexOf("~");
    const bounds = entry.slice(cut + 1).split(",").map(Number);
    if (cut > 0 && bounds.length === 2 && bounds.every(Number.isFinite)) {
      view.zoom[entry.slice(0, cut)] = bounds;
    }
  }
}

function writeUrl() {
  const query = new URLSearchParams();
  if (view.selected) [...view.selected].sort().forEach((run) => query.append("run", run));
  [...view.hidden].sort().forEach((run) => query.append("hide", run));
  if (view.tags) query.set("tags", view.tags);
  if (view.x !== "step") query.set("x", view.x);
  if (view.smoothing) query.set("smooth", String(view.smoothing));
  view.by.forEach((key) => query.append("by", key));
  view.over.forEach((key) => query.append("over", key));
  if (view.band !== "std") query.set("band", view.band);
  if (view.metric !== "last") query.set("metric", view.metric);
  if (view.filter) query.set("filter", view.filter);
  if (view.sort) query.set("sort", (view.sort[1] === "desc" ? "-" : "") + view.sort[0]);
  for (const [tag, range] of Object.entries(view.zoom)) query.append("zoom", `${tag}~${range.join(",")}`);
  history.replaceState(null, "", `#${query}`);
}

// ---------------------------------------------------------------- the runs table
let overview = null;
let colours = new Map(); // run path -> colour

function isSelected(run) {
  return view.selected === null || view.selected.has(run);
}

function cellValue(entry, column) {
  if (column.kind === "run") return entry.run;
  if (column.kind === "group") return entry.group;
  if (column.kind === "contexts") return entry.contexts.map((context) => context || "(run dir)").join(", ");
  if (column.kind === "param") return entry.params[column.key];
  const metric = entry.metrics[column.key];
  return metric ? metric[view.metric] : undefined;
}

function columns() {
  return [
    { kind: "run", key: "run", title: "run" },
    { kind: "group", key: "group", title: "group" },
    { kind: "contexts", key: "contexts", title: "contexts" },
    ...overview.params.map((key) => ({ kind: "param", key, title: key })),
    ...overview.metrics.map((key) => ({ kind: "metric", key, title: `${key} (${view.metric})` })),
  ];
}

function columnId(column) {
  return `${column.kind}:${column.key}`;
}

// Missing values sort last whichever the direction.
function compare(left, right, direction) {
  const missing = (value) => value === undefined || value === null || value === "";
  if (missing(left) || missing(right)) return missing(left) - missing(right);
  const order = typeof left === "number" && typeof right === "number"
    ? left - right
    : String(left).localeCompare(String(right), undefined, { numeric: true });
  return direction === "desc" ? -order : order;
}

function filteredRuns() {
  const needle = view.filter.trim().toLowerCase();
  const all = columns();
  return overview.runs.filter(
    (entry) => !needle || all.some((column) => String(cellValue(entry, column) ?? "").toLowerCase().includes(needle)),
  );
}

function drawTable() {
  const table = document.getElementById("runs-table");
  const all = columns();
  const head = document.createElement("tr");
  head.append(document.createElement("th"));
  for (const column of all) {
    const th = document.createElement("th");
    th.textContent = column.title;
    th.dataset.column = columnId(column);
    if (view.sort && view.sort[0] === columnId(column)) th.dataset.sort = view.sort[1];
    th.addEventListener("click", () => {
      const id = columnId(column);
      view.sort = [id, view.sort && view.sort[0] === id && view.sort[1] === "asc" ? "desc" : "asc"];
      drawTable();
      writeUrl();
    });
    head.append(th);
  }
  table.tHead.replaceChildren(head);
  let rows = overview.runs.slice();
  if (view.sort) {
    const column = all.find((candidate) => columnId(candidate) === view.sort[0]);
    if (column) {
      rows.sort((a, b) => compare(cellValue(a, column), cellValue(b, column), view.sort[1]));
    }
  }
  const shown = new Set(filteredRuns().map((entry) => entry.run));
  const body = rows.map((entry) => {
    const tr = document.createElement("tr");
    tr.dataset.run = entry.run;
    tr.hidden = !shown.has(entry.run);
    const box = document.createElement("input");
    box.type = "checkbox";
    box.checked = isSelected(entry.run);
    box.setAttribute("aria-label", `select ${entry.run}`);
    box.addEventListener("change", () => toggleSelected(entry.run, box.checked));
    const first = document.createElement("td");
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = colours.get(entry.run);
    first.append(box, swatch);
    tr.append(first);
    for (const column of all) {
      const td = document.createElement("td");
      const value = cellValue(entry, column);
      td.textContent = value === undefined || value === null ? "" : typeof value === "number" ? formatNumber(value) : String(value);
      td.title = td.textContent;
      if (typeof value === "number") td.className = "number";
      tr.append(td);
    }
    return tr;
  });
  table.tBodies[0].replaceChildren(...body);
  const selectedCount = overview.runs.filter((entry) => isSelected(entry.run)).length;
  document.getElementById("run-count").textContent =
    `${selectedCount} of ${overview.runs.length} runs selected, ${shown.size} shown`;
}

function formatNumber(value) {
  return Number.isInteger(value) ? String(value) : value.toPrecision(6).replace(/\.?0+(e|$)/, "$1");
}

function toggleSelected(run, on) {
  const next = new Set(view.selected === null ? overview.runs.map((entry) => entry.run) : view.selected);
  if (on) next.add(run); else next.delete(run);
  setSelection(next);
}

function setSelection(runs) {
  view.selected = runs.size === overview.runs.length ? null : runs;
  writeUrl();
  drawTable();
  drawCharts();
}

// ---------------------------------------------------------------- the legend
function drawLegend() {
  const legend = document.getElementById("legend");
  const buttons = overview.runs.filter((entry) => isSelected(entry.run)).map((entry) => {
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.run = entry.run;
    button.setAttribute("aria-pressed", String(!view.hidden.has(entry.run)));
    button.title = entry.run;
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = colours.get(entry.run);
    button.append(swatch, document.createTextNode(entry.run));
    button.addEventListener("click", () => {
      if (view.hidden.has(entry.run)) view.hidden.delete(entry.run); else view.hidden.add(entry.run);
      writeUrl();
      drawLegend();
      drawCharts();
    });
    return button;
  });
  legend.replaceChildren(...buttons);
}

// ---------------------------------------------------------------- the charts
let generation = 0;

function visibleRunIds() {
  return overview.runs.filter((entry) => isSelected(entry.run) && !view.hidden.has(entry.run)).map((entry) => entry.id);
}

function contextDash(context) {
  const contexts = [...new Set(overview.runs.flatMap((entry) => entry.contexts))].sort();
  return DASHES[Math.max(0, contexts.indexOf(context)) % DASHES.length];
}

function lineTraces(answer) {
  const traces = [];
  for (const line of answer.lines) {
    const colour = colours.get(line.run);
    const name = escapeForPlotly(line.context ? `${line.run} [${line.context}]` : line.run);
    const xs = view.x === "wall" ? line.x.map((t) => new Date(t * 1000)) : line.x;
    const base = { type: "scatter", mode: "lines", x: xs, name, hovertemplate: `${name}<br>%{x}: %{y}<extra></extra>` };
    const dash = contextDash(line.context);
    if (view.smoothing > 0) {
      traces.push({ ...base, y: line.y, line: { color: colour, width: 1, dash }, opacity: 0.25, hoverinfo: "skip", hovertemplate: undefined });
      traces.push({ ...base, y: smooth(line.y, view.smoothing), line: { color: colour, width: 1.5, dash } });
    } else {
      traces.push({ ...base, y: line.y, line: { color: colour, width: 1.5, dash } });
    }
    if (line.nan.length) {
      traces.push({
        type: "scatter", mode: "markers", yaxis: "y2", name: `${name} NaN`,
        x: view.x === "wall" ? line.nan.map((t) => new Date(t * 1000)) : line.nan,
        y: line.nan.map(() => 0.97),
        marker: { symbol: "x", color: colour, size: 7 },
        hovertemplate: `${name}<br>NaN at %{x}<extra></extra>`,
      });
    }
  }
  return traces;
}

function groupTraces(answer) {
  const traces = [];
  answer.groups.forEach((group, index) => {
    const colour = PALETTE[index % PALETTE.length];
    const name = escapeForPlotly((group.label || "all runs") + (group.context ? ` [${group.context}]` : ""));
    const mean = view.smoothing > 0 ? smooth(group.mean, view.smoothing) : group.mean;
    traces.push({ type: "scatter", mode: "lines", x: group.steps, y: group.low, line: { width: 0, color: colour }, hoverinfo: "skip", showlegend: false });
    traces.push({ type: "scatter", mode: "lines", x: group.steps, y: group.high, fill: "tonexty", fillcolor: colour + "33", line: { width: 0, color: colour }, hoverinfo: "skip", showlegend: false });
    traces.push({ type: "scatter", mode: "lines", x: group.steps, y: mean, name, line: { color: colour, width: 2, dash: contextDash(group.context) }, hovertemplate: `${name}<br>%{x}: %{y}<extra></extra>` });
  });
  return traces;
}

function layout(tag, range, grouped) {
  const title = { step: "step", relative: "seconds since the run's first point", wall: "wall time (UTC)" }[view.x];
  const xaxis = { title: { text: grouped ? "step" : title }, automargin: true };
  if (range) { xaxis.range = view.x === "wall" ? range.map((t) => new Date(t * 1000)) : range; xaxis.autorange = false; }
  return {
    margin: MARGIN,
    showlegend: grouped,
    legend: { orientation: "h", y: -0.25 },
    xaxis,
    yaxis: { automargin: true },
    yaxis2: { overlaying: "y", range: [0, 1], visible: false, fixedrange: true },
    uirevision: tag,
  };
}

async function drawPanel(panel, tag, mine) {
  const plot = panel.querySelector(".plot");
  const note = panel.querySelector(".note");
  const ids = visibleRunIds();
  const grouped = view.by.length + view.over.length > 0;
  const range = view.zoom[tag] || null;
  const width = Math.max(100, Math.round((plot.clientWidth || 600) - MARGIN.l - MARGIN.r));
  let traces;
  let points = 0;
  let thinned = false;
  if (grouped) {
    const answer = await source.groups(tag, ids, view.by, view.over, view.band);
    if (mine !== generation) return;
    traces = groupTraces(answer);
    points = answer.groups.reduce((sum, group) => sum + group.steps.length, 0);
    note.textContent = `${answer.groups.length} groups by ${answer.keys.join(", ")}: mean and ${view.band} band`;
  } else {
    const answer = await source.chart(tag, ids, view.x, range, width);
    if (mine !== generation) return;
    if (TBV.timing.firstAnswer === undefined) TBV.timing.firstAnswer = performance.now();
    traces = lineTraces(answer);
    points = answer.lines.reduce((sum, line) => sum + line.points, 0);
    thinned = answer.lines.some((line) => line.thinned);
    // A published line says how many buckets its level has; the server thins to the width.
    const levels = answer.lines.filter((line) => line.thinned && line.buckets).map((line) => line.buckets);
    const buckets = levels.length ? Math.min(...levels) : width;
    note.textContent = `${counted(answer.lines.length, "line")}, ${counted(points, "point")}` +
      (thinned ? `, thinned to the first, last, min and max of ${buckets} buckets per line (zoom in for more)` : ", every point drawn");
  }
  await plotlyReady;
  if (mine !== generation) return;
  panel.classList.toggle("empty", traces.length === 0);
  if (traces.length === 0) {
    note.textContent = "None of the runs shown logged this tag.";
    Plotly.purge(plot);
    delete plot.dataset.listening;
  } else {
    await Plotly.react(plot, traces, layout(tag, range, grouped), { responsive: true, displaylogo: false });
  }
  panel.dataset.state = "drawn";
  panel.dataset.points = String(points);
  panel.dataset.thinned = String(thinned);
  panel.dataset.traces = String(traces.length);
  if (TBV.timing.firstChart === undefined) TBV.timing.firstChart = performance.now();
  if (traces.length && !plot.dataset.listening) {
    plot.dataset.listening = "1";
    plot.on("plotly_relayout", (event) => onZoom(panel, tag, event));
  }
}

function onZoom(panel, tag, event) {
  if (view.by.length + view.over.length > 0) return;
  let changed = false;
  if (event["xaxis.autorange"]) {
    changed = tag in view.zoom;
    delete view.zoom[tag];
  } else if (event["xaxis.range[0]"] !== undefined || event["xaxis.range"]) {
    const raw = event["xaxis.range"] || [event["xaxis.range[0]"], event["xaxis.range[1]"]];
    const bounds = raw.map((value) => (view.x === "wall" ? new Date(String(value).replace(" ", "T") + "Z").getTime() / 1000 : Number(value)));
    if (bounds.every(Number.isFinite)) { view.zoom[tag] = bounds; changed = true; }
  }
  if (!changed) return;
  writeUrl();
  panel.dataset.state = "loading";
  drawPanel(panel, tag, generation).catch(showError);
}

async function drawCharts() {
  const mine = ++generation;
  drawLegend();
  const matcher = tagMatcher(view.tags);
  const tags = overview.tags.filter(matcher);
  const charts = document.getElementById("charts");
  const panels = new Map([...charts.children].map((panel) => [panel.dataset.tag, panel]));
  const ordered = tags.map((tag) => {
    let panel = panels.get(tag);
    if (!panel) {
      panel = document.createElement("div");
      panel.className = "panel";
      panel.dataset.tag = tag;
      const heading = document.createElement("h2");
      heading.textContent = tag;
      const plot = document.createElement("div");
      plot.className = "plot";
      const note = document.createElement("p");
      note.className = "note";
      panel.append(heading, plot, note);
    }
    panel.dataset.state = "loading";
    return panel;
  });
  charts.replaceChildren(...ordered);
  document.body.dataset.ready = "false";
  for (const panel of ordered) {
    await drawPanel(panel, panel.dataset.tag, mine);
    if (mine !== generation) return;
  }
  const empty = ordered.filter((panel) => panel.classList.contains("empty")).length;
  document.getElementById("charts-note").textContent = empty
    ? `${empty} of ${ordered.length} tags hidden: none of the runs shown logged them.`
    : "";
  await plotlyReady;
  await TBV.drawMedia(visibleRunIds(), matcher, mine, () => generation);
  if (mine !== generation) return;
  document.body.dataset.ready = "true";
}

function showError(error) {
  document.getElementById("message").textContent = String(error && error.message ? error.message : error);
  document.body.dataset.ready = "error";
}

// ---------------------------------------------------------------- controls
function bindControls() {
  const bind = (id, read, write, event = "change") => {
    const element = document.getElementById(id);
    write(element);
    element.addEventListener(event, () => { read(element); writeUrl(); refresh(id); });
  };
  const list = (text) => text.split(",").map((part) => part.trim()).filter(Boolean);
  bind("tag-filter", (e) => { view.tags = e.value; }, (e) => { e.value = view.tags; }, "input");
  bind("x-axis", (e) => { view.x = e.value; view.zoom = {}; }, (e) => { e.value = view.x; });
  bind("smoothing", (e) => { view.smoothing = Number(e.value); }, (e) => { e.value = view.smoothing; });
  bind("group-by", (e) => { view.by = list(e.value); }, (e) => { e.value = view.by.join(", "); });
  bind("aggregate-over", (e) => { view.over = list(e.value); }, (e) => { e.value = view.over.join(", "); });
  bind("band", (e) => { view.band = e.value; }, (e) => { e.value = view.band; });
  bind("metric-kind", (e) => { view.metric = e.value; }, (e) => { e.value = view.metric; });
  bind("run-filter", (e) => { view.filter = e.value; }, (e) => { e.value = view.filter; }, "input");
  document.getElementById("select-all").addEventListener("click", () => setSelection(new Set(overview.runs.map((e) => e.run))));
  document.getElementById("select-none").addEventListener("click", () => setSelection(new Set()));
  document.getElementById("select-filtered").addEventListener("click", () => setSelection(new Set(filteredRuns().map((e) => e.run))));
}

function refresh(changed) {
  document.getElementById("smoothing-value").textContent = String(view.smoothing);
  if (changed === "run-filter" || changed === "metric-kind") { drawTable(); return; }
  drawCharts().catch(showError);
}

// ---------------------------------------------------------------- start
const source = window.TBV_MODE === "static" ? TBV.staticSource : serverSource;

async function start() {
  readUrl();
  overview = await source.overview();
  overview.runs.forEach((entry, index) => colours.set(entry.run, PALETTE[index % PALETTE.length]));
  // Past MANY_RUNS runs a chart of them all reads every point of each (docs/performance.md):
  // the first DEFAULT_RUNS are shown until the view names others.
  if (view.selected === null && overview.runs.length > MANY_RUNS) {
    view.selected = new Set(overview.runs.slice(0, DEFAULT_RUNS).map((entry) => entry.run));
  }
  if (window.TBV_MODE !== "static") document.getElementById("datasette-link").hidden = !overview.datasette;
  else TBV.describeBundle(view);
  document.getElementById("store-summary").textContent =
    `${overview.runs.length} runs, ${overview.tags.length} scalar tags`;
  bindControls();
  document.getElementById("smoothing-value").textContent = String(view.smoothing);
  // The first chart's request leaves before the table is built.
  const charts = drawCharts();
  drawTable();
  await charts;
}

start().catch(showError);
