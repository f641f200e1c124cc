// The episode page: cameras played in sync, plots on the episode's time axis with a cursor
// that follows the video, the doctor's findings on the timeline, and the decision form.
// Times on the page are seconds from the episode's first step; a camera's video time maps
// to it through the frames the steps saw (plots.cameras: frame index -> step time).
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("episode-data").textContent);
  const episodeId = data.episode_id;
  const base = `/episodes/${encodeURIComponent(episodeId)}`;
  const api = `/api/episodes/${encodeURIComponent(episodeId)}`;
  const byTestId = (id) => document.querySelector(`[data-testid="${id}"]`);
  const videos = Array.from(document.querySelectorAll("video[data-camera]"));
  const depths = Array.from(document.querySelectorAll("img[data-depth]")).map((img) => ({ img, loading: false, shown: null }));
  const master = videos[0] || null;
  const seek = byTestId("seek");
  const timeLabel = byTestId("time");
  const playButton = byTestId("play");
  const plotDiv = document.getElementById("plot");
  const SEVERITY_COLOURS = { error: "rgba(180,35,24,0.22)", warning: "rgba(181,71,8,0.18)", info: "rgba(36,87,197,0.12)" };

  let plots = null; // the server's decimated signals, once fetched
  let start = 0; // the first step's timestamp: page time 0
  let findingShapes = [];
  let shownTime = null;
  let lastCursorDraw = 0;
  let cursorTimer = null;
  const CURSOR_MS = 50;
  let dragging = false;
  const clock = { playing: false, origin: 0, at: 0 }; // for an episode with no colour video

  function interpolate(xs, ys, x) {
    if (!xs.length) return x;
    if (x <= xs[0]) return ys[0] + (x - xs[0]);
    const last = xs.length - 1;
    if (x >= xs[last]) return ys[last] + (x - xs[last]);
    let lo = 0;
    let hi = last;
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      if (xs[mid] <= x) lo = mid;
      else hi = mid;
    }
    const span = xs[hi] - xs[lo];
    return span > 0 ? ys[lo] + ((x - xs[lo]) * (ys[hi] - ys[lo])) / span : ys[lo];
  }

  function camera(name) {
    return plots && plots.cameras[name] && plots.cameras[name].fps ? plots.cameras[name] : null;
  }

  // video time (s) of a camera -> page time (s)
  function pageTime(name, videoTime) {
    const c = camera(name);
    if (!c) return videoTime;
    const times = c.time.map((t) => t - start);
    return Math.max(0, interpolate(c.frame, times, videoTime * c.fps));
  }

  // page time (s) -> video time (s) of a camera: inside the frame the steps saw then
  function videoTime(name, t) {
    const c = camera(name);
    if (!c) return t;
    const times = c.time.map((x) => x - start);
    const frame = Math.round(interpolate(times, c.frame, t));
    return Math.max(0, (frame + 0.25) / c.fps);
  }

  function now() {
    if (master) return pageTime(master.dataset.camera, master.currentTime);
    return clock.playing ? clock.at + (performance.now() - clock.origin) / 1000 : clock.at;
  }

  function drawCursor(t) {
    if (!plots || !plotDiv.data) return;
    const shapes = [...findingShapes, cursorShape(t)];
    Plotly.relayout(plotDiv, { shapes });
  }

  // at most one relayout per CURSOR_MS, and always one for the last time shown
  function scheduleCursor() {
    if (cursorTimer !== null) return;
    const wait = Math.max(0, lastCursorDraw + CURSOR_MS - performance.now());
    cursorTimer = setTimeout(() => {
      cursorTimer = null;
      lastCursorDraw = performance.now();
      drawCursor(shownTime === null ? 0 : shownTime);
    }, wait);
  }

  function cursorShape(t) {
    return { type: "line", xref: "x", yref: "paper", x0: t, x1: t, y0: 0, y1: 1, line: { color: "#2457c5", width: 2 } };
  }

  function showDepth(t) {
    for (const depth of depths) {
      const name = depth.img.dataset.camera;
      const c = camera(name);
      const step = c ? 1 / c.fps : 1 / 30;
      const wanted = Math.floor(t / step) * step;
      if (depth.loading || depth.shown === wanted) continue;
      depth.loading = true;
      depth.shown = wanted;
      depth.img.src = `${base}/depth/${encodeURIComponent(name)}?t=${(start + wanted + step / 2).toFixed(4)}`;
    }
  }
  for (const depth of depths) {
    depth.img.addEventListener("load", () => (depth.loading = false));
    depth.img.addEventListener("error", () => (depth.loading = false));
  }

  function show(t) {
    shownTime = t;
    timeLabel.textContent = `${t.toFixed(2)} s`;
    document.body.dataset.time = t.toFixed(3);
    if (!dragging) seek.value = String(t);
    scheduleCursor();
    showDepth(t);
  }

  function followers(t) {
    for (const video of videos) {
      if (video === master) continue;
      const target = videoTime(video.dataset.camera, t);
      if (Math.abs(video.currentTime - target) > 0.15) video.currentTime = target;
      if (master && !master.paused && video.paused) video.play().catch(() => {});
    }
  }

  function seekTo(t) {
    t = Math.max(0, Math.min(t, data.duration));
    for (const video of videos) video.currentTime = videoTime(video.dataset.camera, t);
    clock.at = t;
    clock.origin = performance.now();
    show(t);
    drawCursor(t);
  }

  function setPlaying(playing) {
    clock.at = now();
    clock.origin = performance.now();
    clock.playing = playing;
    for (const video of videos) {
      if (playing) video.play().catch(() => {});
      else video.pause();
    }
    playButton.textContent = playing ? "Pause" : "Play";
  }

  function tick() {
    const t = now();
    if (!master && clock.playing && t >= data.duration) setPlaying(false);
    if (shownTime === null || Math.abs(t - shownTime) > 0.001) show(t);
    if (master && !master.paused) followers(t);
    requestAnimationFrame(tick);
  }

  playButton.addEventListener("click", () => setPlaying(master ? master.paused : !clock.playing));
  if (master) {
    master.addEventListener("ended", () => setPlaying(false));
    master.addEventListener("seeked", () => followers(now()));
  }
  seek.addEventListener("input", () => {
    dragging = true;
    seekTo(Number(seek.value));
  });
  seek.addEventListener("change", () => (dragging = false));

  // ---------------------------------------------------------------- plots
  async function loadPlots() {
    const response = await fetch(`${api}/plots`);
    plots = await response.json();
    start = plots.start;
    const panels = plots.panels;
    const traces = [];
    const annotations = [];
    const layout = {
      margin: { l: 60, r: 10, t: 22, b: 36 },
      showlegend: false,
      hovermode: "x",
      grid: { rows: panels.length, columns: 1, pattern: "coupled", roworder: "top to bottom" },
      xaxis: { title: { text: "time (s)" }, range: [0, Math.max(data.duration, 0.001)] },
      shapes: [cursorShape(0)],
    };
    panels.forEach((panel, i) => {
      const axis = i === 0 ? "y" : `y${i + 1}`;
      const time = panel.time.map((t) => t - start);
      for (const series of panel.series) {
        traces.push({ x: time, y: series.values, name: series.name, yaxis: axis, xaxis: "x", type: "scatter", mode: "lines", line: { width: 1 } });
      }
      layout[i === 0 ? "yaxis" : `yaxis${i + 1}`] = { title: { text: panel.unit, font: { size: 10 } } };
      annotations.push({
        text: `<b>${panel.title}</b>`, xref: "paper", yref: `${axis} domain`, x: 0, y: 1, xanchor: "left", yanchor: "bottom",
        showarrow: false, font: { size: 11 },
      });
    });
    layout.annotations = annotations;
    await Plotly.newPlot(plotDiv, traces, layout, { displaylogo: false, responsive: true });
    plotDiv.on("plotly_click", (event) => {
      if (event.points && event.points.length) seekTo(Number(event.points[0].x));
    });
    document.body.dataset.plotReady = "true";
    drawCursor(now());
  }

  // ---------------------------------------------------------------- findings
  async function loadFindings() {
    const state = byTestId("findings-state");
    let answer;
    try {
      answer = await (await fetch(`${api}/findings`)).json();
    } catch (error) {
      setTimeout(loadFindings, 3000);
      return;
    }
    if (answer.state === "pending") {
      state.textContent = "the doctor is examining this episode…";
      setTimeout(loadFindings, 1500);
      return;
    }
    if (answer.state === "failed") {
      state.textContent = `the doctor failed: ${answer.reason}`;
      return;
    }
    const list = byTestId("findings");
    list.replaceChildren();
    state.textContent = answer.findings.length ? `${answer.findings.length} finding(s)` : "no findings";
    findingShapes = [];
    for (const finding of answer.findings) {
      const item = document.createElement("li");
      item.className = finding.severity;
      item.dataset.testid = "finding";
      item.dataset.rule = finding.rule;
      const span = finding.start_s === null || finding.start_s === undefined ? "" : ` ${(finding.start_s - start).toFixed(2)} s`;
      item.textContent = `${finding.severity} ${finding.rule}${finding.stream ? ` (${finding.stream})` : ""}${span}: ${finding.message}`;
      if (finding.start_s !== null && finding.start_s !== undefined) {
        const from = finding.start_s - start;
        const to = finding.end_s === null || finding.end_s === undefined ? from : finding.end_s - start;
        item.dataset.start = from.toFixed(3);
        item.addEventListener("click", () => seekTo(from));
        findingShapes.push({
          type: "rect", xref: "x", yref: "paper", x0: from, x1: Math.max(to, from + 0.02), y0: 0, y1: 1,
          fillcolor: SEVERITY_COLOURS[finding.severity] || SEVERITY_COLOURS.info, line: { width: 0 }, layer: "below",
        });
      }
      list.appendChild(item);
    }
    drawCursor(now());
  }

  // ---------------------------------------------------------------- decisions
  // "saved" exists only while what the form shows is what is on disk: made when a save
  // returns, removed by the next change (so automation may wait for it to appear)
  const error = byTestId("save-error");
  function setSaved(on) {
    const saved = byTestId("saved");
    if (saved && !on) saved.remove();
    if (!saved && on) {
      const mark = document.createElement("span");
      mark.className = "saved";
      mark.dataset.testid = "saved";
      mark.textContent = "saved";
      byTestId("save").after(mark);
    }
  }
  const dialog = byTestId("delete-dialog");

  function fail(message) {
    error.textContent = message;
    error.hidden = false;
  }

  async function post(url, body) {
    const response = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const answer = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
    if (!response.ok) throw new Error(answer.error || `HTTP ${response.status}`);
    return answer;
  }

  function decision() {
    const outcome = document.querySelector('input[name="outcome"]:checked');
    const value = outcome ? outcome.value : "unlabelled";
    return {
      success: value === "success" ? true : value === "failure" ? false : null,
      failure_reason: value === "failure" ? byTestId("failure-reason").value || null : null,
      operator_notes: byTestId("notes").value || null,
      review_flag: byTestId("flag").checked,
    };
  }

  for (const control of document.querySelectorAll("form.decision input, form.decision textarea")) {
    control.addEventListener("input", () => setSaved(false));
  }
  byTestId("save").addEventListener("click", async () => {
    setSaved(false);
    error.hidden = true;
    try {
      await post(`${api}/labels`, decision());
      setSaved(true);
    } catch (problem) {
      fail(problem.message);
    }
  });
  byTestId("delete").addEventListener("click", () => (dialog.hidden = false));
  byTestId("cancel-delete").addEventListener("click", () => (dialog.hidden = true));
  byTestId("confirm-delete").addEventListener("click", async () => {
    try {
      await post(`${api}/delete`, {});
      window.location.href = `/?deleted=${encodeURIComponent(episodeId)}`;
    } catch (problem) {
      dialog.hidden = true;
      fail(problem.message);
    }
  });

  window.ortfReview = { seekTo, now, setPlaying };
  loadPlots().catch((problem) => (plotDiv.textContent = `plots could not be drawn: ${problem}`));
  loadFindings();
  requestAnimationFrame(tick);
})();
