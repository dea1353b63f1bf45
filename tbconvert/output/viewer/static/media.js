// Images, audio, texts and histograms of the shown runs: a panel per series, with a step
// slider (a heatmap over steps for histograms).  Logged text is shown as text.  Served by
// the server's API, or by a published bundle's files (TBV.staticMedia, published.js).
"use strict";

(function () {
  const TBV = (window.TBV = window.TBV || {});
  const MAX_PANELS = 60;

  async function get(path, parameters) {
    const response = await fetch(`api/${path}?${new URLSearchParams(parameters)}`);
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  }

  const serverMedia = {
    series: (runIds) => get("media.json", { runs: runIds.join(",") }),
    points: (series) => get("media-points.json", { series: series.id }),
    blobUrl: (series, point) => `api/blob/${point.blob}?series=${series.id}`,
  };
  const source = () => (window.TBV_MODE === "static" ? TBV.staticMedia : serverMedia);

  function slider(points, show) {
    const steps = [...new Set(points.map((point) => point.step))];
    const wrap = document.createElement("div");
    wrap.className = "slider";
    const input = document.createElement("input");
    input.type = "range";
    input.min = "0";
    input.max = String(Math.max(0, steps.length - 1));
    input.value = input.max;
    const label = document.createElement("span");
    const update = () => {
      const step = steps[Number(input.value)];
      label.textContent = `step ${step}`;
      show(points.filter((point) => point.step === step));
    };
    input.addEventListener("input", update);
    wrap.append(input, label);
    return [wrap, update];
  }

  // Images and audio clips: a slider over steps, the step's blobs below it.
  function blobsBody(make) {
    return (series, points, body) => {
      const holder = document.createElement("div");
      const [control, update] = slider(points, (shown) => {
        holder.replaceChildren(...shown.map((point) => make(series, point, source().blobUrl(series, point))));
      });
      body.append(control, holder);
      update();
    };
  }

  const imagesBody = blobsBody((series, point, source) => {
    const image = document.createElement("img");
    image.alt = `${series.tag} at step ${point.step}`;
    image.src = source;
    image.width = Math.min(point.width || 256, 256);
    return image;
  });

  const audioBody = blobsBody((_series, _point, source) => {
    const audio = document.createElement("audio");
    audio.controls = true;
    audio.preload = "none";
    audio.src = source;
    return audio;
  });

  function textsBody(_series, points, body) {
    const holder = document.createElement("pre");
    const [control, update] = slider(points, (shown) => {
      holder.textContent = shown.map((point) => point.value).join("\n");
    });
    body.append(control, holder);
    update();
  }

  function histogramsBody(_series, points, body) {
    // A heatmap over steps: each bucket's count at its centre, like TensorBoard's offset view
    // seen from above.
    const plot = document.createElement("div");
    plot.className = "plot";
    body.append(plot);
    const x = [];
    const y = [];
    const z = [];
    for (const point of points) {
      for (const [left, right, count] of point.buckets) {
        x.push(point.step);
        y.push((left + right) / 2);
        z.push(count);
      }
    }
    const trace = { type: "histogram2d", x, y, z, histfunc: "sum", nbinsx: Math.min(points.length, 100), nbinsy: 60, colorscale: "Viridis", colorbar: { title: { text: "count" } } };
    Plotly.newPlot(plot, [trace], { margin: { l: 50, r: 10, t: 10, b: 40 }, xaxis: { title: { text: "step" } } }, { displaylogo: false, responsive: true });
  }

  const BODIES = { images: imagesBody, audio: audioBody, text: textsBody, histograms: histogramsBody };

  TBV.drawMedia = async function (runIds, matches, mine, current) {
    const section = document.getElementById("media");
    const panels = document.getElementById("media-panels");
    const all = (await source().series(runIds)).filter((series) => matches(series.tag));
    if (mine !== current()) return;
    section.hidden = all.length === 0;
    const shown = all.slice(0, MAX_PANELS);
    const made = shown.map((series) => {
      const panel = document.createElement("div");
      panel.className = "panel media-panel";
      Object.assign(panel.dataset, { tag: series.tag, run: series.run, context: series.context, plugin: series.plugin, state: "loading" });
      const heading = document.createElement("h3");
      heading.textContent = `${series.tag} (${series.plugin})`;
      const owner = document.createElement("p");
      owner.className = "note";
      owner.textContent = series.context ? `${series.run} [${series.context}]` : series.run;
      panel.append(heading, owner);
      return panel;
    });
    panels.replaceChildren(...made);
    document.getElementById("media-note").textContent =
      all.length > shown.length ? `${shown.length} of ${all.length} series shown: filter the tags to see the others` : "";
    for (const [index, series] of shown.entries()) {
      const answer = await source().points(series);
      if (mine !== current()) return;
      const body = document.createElement("div");
      made[index].append(body);
      BODIES[answer.plugin](series, answer.points, body);
      made[index].dataset.state = "drawn";
    }
  };
})();
