// The data source of a published viewer (tbconvert publish): files beside the page, loaded by
// <script> tags, since a page opened from file:// may not fetch.  Each tag's file holds every
// line at a few resolutions (levels); a view takes the coarsest level fine enough for the
// chart's width over the visible range, or the finest there is.
"use strict";

(function () {
  const TBV = (window.TBV = window.TBV || {});
  const waiting = new Map(); // tag file -> [resolve, reject]
  const loaded = new Map(); // tag file -> its data

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

  // A level as written: steps as differences, values as base64 float32 or float64.
  function decode(level) {
    if (level.x) return level;
    const bytes = Uint8Array.from(atob(level.y64), (c) => c.charCodeAt(0));
    const values = level.f32 ? new Float32Array(bytes.buffer) : new Float64Array(bytes.buffer);
    let step = 0;
    level.x = level.dx.map((difference) => (step += difference));
    level.y = Array.from(values, (value) => (Number.isFinite(value) ? value : null));
    level.nan = level.x.filter((_x, index) => level.y[index] === null);
    return level;
  }

  // The coarsest level with a bucket per pixel column over the range (the whole line when
  // there is none), or the finest.
  function pick(levels, range, buckets) {
    const wanted = range || [levels[0].low, levels[0].high];
    for (const level of levels) {
      const span = (level.high - level.low) / Math.max(1, level.buckets);
      if (level.exact || span * buckets <= wanted[1] - wanted[0]) return level;
    }
    return levels[levels.length - 1];
  }

  function within(level, range) {
    if (!range) return { x: level.x, y: level.y, nan: level.nan, thinned: !level.exact, points: level.points };
    const keep = [];
    level.x.forEach((x, index) => {
      // One point past each end, so the line reaches the chart's edges.
      const next = level.x[index + 1];
      const previous = level.x[index - 1];
      if ((x >= range[0] && x <= range[1]) || (next !== undefined && x < range[0] && next >= range[0]) ||
          (previous !== undefined && x > range[1] && previous <= range[1])) keep.push(index);
    });
    return {
      x: keep.map((i) => level.x[i]),
      y: keep.map((i) => level.y[i]),
      nan: level.nan.filter((x) => x >= range[0] && x <= range[1]),
      thinned: !level.exact,
      points: level.points,
    };
  }

  TBV.staticSource = {
    overview() {
      return Promise.resolve(TBV.published.overview);
    },
    async chart(tag, runIds, x, range, buckets) {
      if (x !== "step") throw new Error("a published viewer draws by step only");
      const file = TBV.published.files[tag];
      const payload = file ? await load(file) : { lines: [] };
      const wanted = new Set(runIds);
      const lines = payload.lines.filter((line) => wanted.has(line.run_id)).map((line) => {
        const level = decode(pick(line.levels, range, buckets));
        return { run_id: line.run_id, run: line.run, context: line.context, buckets: level.buckets, ...within(level, range) };
      });
      return { tag, x, lines };
    },
    groups() {
      return Promise.reject(new Error("a published viewer has no groups"));
    },
  };
})();
