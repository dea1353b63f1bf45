// The data source of a published viewer (tbconvert publish): files beside the page, loaded by
// <script> tags, since a page opened from file:// may not fetch.  Each tag's file holds every
// line at a few resolutions (levels) with the wall time of each point; a view takes the
// coarsest level fine enough for the chart's width over the visible range, or the finest
// there is.  Groups and media are files of their own (tbconvert/output/viewer/bundle_*.py).
"use strict";

(function () {
  const TBV = (window.TBV = window.TBV || {});
  const waiting = new Map(); // data file -> [resolve, reject]
  const loaded = new Map(); // data file -> its data

  TBV.receive = function (file, payload) {
    loaded.set(file, payload);
    const pending = waiting.get(file);
    if (pending) pending[0](payload);
  };

  function load(file) {
    if (loaded.has(file)) return Promise.resolve(loaded.get(file));
    return new Promise((resolve, reject) => {
      waiting.set(file, [resolve, reject]);
      const script = document.createElement("script");
      script.src = `data/${file}`;
      script.onerror = () => reject(new Error(`cannot load data/${file}`));
      document.head.append(script);
    });
  }

  function bytesOf(base64) {
    return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0)).buffer;
  }

  // base64 float32 or float64 values, NaN and infinities as null.
  function floats(base64, single) {
    const values = single ? new Float32Array(bytesOf(base64)) : new Float64Array(bytesOf(base64));
    return Array.from(values, (value) => (Number.isFinite(value) ? value : null));
  }

  function cumulative(differences) {
    let total = 0;
    return differences.map((difference) => (total += difference));
  }

  // Wall times: the first and whole milliseconds since it (base64 int32 differences), or
  // float64 (bundle_encoding.wall_times).
  function wallTimes(level) {
    if (level.t64 !== undefined) return Array.from(new Float64Array(bytesOf(level.t64)));
    const since = cumulative(Array.from(new Int32Array(bytesOf(level.dt))));
    return since.map((milliseconds) => level.t0 + milliseconds / 1000);
  }

  // A level as written: steps as differences, values and wall times in base64.
  function decode(level) {
    if (level.x) return level;
    level.x = cumulative(level.dx);
    level.y = floats(level.y64, level.f32);
    level.t = wallTimes(level);
    level.tlow = Infinity;
    level.thigh = -Infinity;
    for (const t of level.t) {
      if (t < level.tlow) level.tlow = t;
      if (t > level.thigh) level.thigh = t;
    }
    return level;
  }

  // A level's x values on the axis asked for: steps, wall times, or seconds since the line's
  // first point (as serve counts relative time).
  function axis(level, line, x) {
    if (x === "step") return { xs: level.x, low: level.low, high: level.high };
    const shift = x === "relative" ? (line.start ?? level.t[0]) : 0;
    return { xs: level.t.map((t) => t - shift), low: level.tlow - shift, high: level.thigh - shift };
  }

  // The coarsest level with a bucket per pixel column over the range (the whole line when
  // there is none), or the finest.
  function pick(line, x, range, buckets) {
    const levels = line.levels;
    for (const level of levels) {
      const { low, high } = axis(x === "step" ? level : decode(level), line, x);
      const wanted = range || [low, high];
      const span = (high - low) / Math.max(1, level.buckets);
      if (level.exact || span * buckets <= wanted[1] - wanted[0]) return level;
    }
    return levels[levels.length - 1];
  }

  function within(level, xs, range) {
    const all = { x: xs, y: level.y, thinned: !level.exact, points: level.points };
    const keep = [];
    xs.forEach((x, index) => {
      // One point past each end, so the line reaches the chart's edges.
      const next = xs[index + 1];
      const previous = xs[index - 1];
      if (!range || (x >= range[0] && x <= range[1]) || (next !== undefined && x < range[0] && next >= range[0]) ||
          (previous !== undefined && x > range[1] && previous <= range[1])) keep.push(index);
    });
    const inside = (x) => !range || (x >= range[0] && x <= range[1]);
    return {
      ...all,
      x: keep.map((i) => xs[i]),
      y: keep.map((i) => level.y[i]),
      nan: keep.filter((i) => level.y[i] === null && inside(xs[i])).map((i) => xs[i]),
    };
  }

  // A group's band, by the arithmetic of Statistics.band (tbconvert/query/aggregation.py).
  function band(group, kind, mean) {
    const std = floats(group.std, false);
    if (kind === "minmax") return [floats(group.min, false), floats(group.max, false)];
    if (kind === "none") return [mean, mean];
    let half = std;
    if (kind === "sem" || kind === "ci95") {
      half = std.map((value, i) => (group.count[i] && value !== null ? value / Math.sqrt(group.count[i]) : null));
    }
    if (kind === "ci95") {
      half = half.map((value, i) => (value === null || group.t975[group.count[i]] === null ? null : value * group.t975[group.count[i]]));
    }
    const edge = (sign) => mean.map((middle, i) => (middle === null || half[i] === null ? null : middle + sign * half[i]));
    return [edge(-1), edge(1)];
  }

  function sameGrouping(published, by, over) {
    const same = (a, b) => a.length === b.length && a.every((key, i) => key === b[i]);
    return published && same(published.by, by) && same(published.over, over);
  }

  TBV.staticSource = {
    overview() {
      return Promise.resolve(TBV.published.overview);
    },
    async chart(tag, runIds, x, range, buckets) {
      const file = TBV.published.files[tag];
      const payload = file ? await load(file) : { lines: [] };
      const wanted = new Set(runIds);
      const lines = payload.lines.filter((line) => wanted.has(line.run_id)).map((line) => {
        const level = decode(pick(line, x, range, buckets));
        const { xs } = axis(level, line, x);
        return { run_id: line.run_id, run: line.run, context: line.context, buckets: level.buckets, ...within(level, xs, range) };
      });
      return { tag, x, lines };
    },
    // The groups of the published grouping, each over all its published runs; drawn when one
    // of its runs is shown.
    async groups(tag, runIds, by, over, kind) {
      const bundle = TBV.published.groups || { grouping: null, files: {} };
      if (!sameGrouping(bundle.grouping, by, over)) {
        const named = bundle.grouping
          ? `groups by ${[...bundle.grouping.by, ...bundle.grouping.over.map((key) => `all but ${key}`)].join(", ")} only`
          : "no groups";
        throw new Error(`this published viewer holds ${named} (tbconvert publish --group-by/--aggregate-over)`);
      }
      const file = bundle.files[tag];
      if (!file) return { tag, keys: [], groups: [] };
      const payload = await load(file);
      const shown = new Set(TBV.published.overview.runs.filter((run) => runIds.includes(run.id)).map((run) => run.run));
      const groups = payload.groups.filter((group) => group.runs.some((run) => shown.has(run))).map((group) => {
        const mean = floats(group.mean, false);
        const [low, high] = band(group, kind, mean);
        return { label: group.label, context: group.context, runs: group.runs, steps: cumulative(group.dx), mean, low, high, count: group.count };
      });
      return { tag, keys: payload.keys, groups };
    },
  };

  // Media: the series written, their points, and each image's or clip's file beside the page.
  TBV.staticMedia = {
    series(runIds) {
      const wanted = new Set(runIds);
      return Promise.resolve(TBV.published.media.filter((series) => wanted.has(series.run_id)));
    },
    points(series) {
      return load(series.file);
    },
    blobUrl(_series, point) {
      return point.file;
    },
  };

  // The page told what the bundle holds: the grouping it was published with (the grouping
  // fields show it; a view naming another is refused with a message), and what the budget
  // (--max-size) left out.
  TBV.describeBundle = function (view) {
    const grouping = (TBV.published.groups || {}).grouping;
    document.getElementById("group-by").placeholder = grouping ? grouping.by.join(", ") || "(none)" : "no groups published";
    document.getElementById("aggregate-over").placeholder = grouping ? grouping.over.join(", ") || "(none)" : "no groups published";
    if (!grouping) {
      document.querySelectorAll(".grouping").forEach((label) => { label.hidden = true; });
      view.by = [];
      view.over = [];
    }
    const what = { groups: "tags' groups", media: "media series" };
    const notes = Object.entries(TBV.published.left_out || {}).map(([kind, names]) => {
      const cut = (name) => (name.length > 60 ? `${name.slice(0, 57)}...` : name);
      const shown = names.slice(0, 5).map(cut).join("; ") + (names.length > 5 ? "; ..." : "");
      return `Left out of this bundle to stay within its --max-size: ${names.length} ${what[kind] || kind} (${shown}).`;
    });
    const note = document.getElementById("bundle-note");
    note.textContent = notes.join(" ");
    note.hidden = notes.length === 0;
  };
})();
