/* freezewatch timeline charts: uPlot panels on one shared time axis (synced cursor, aligned
   plot areas, 24 h tick labels in the page's time zone), drag-to-zoom and double-click reported
   to the page, with kernel-event markers (click: onMarker), vLLM phase bands, incident spans
   (click: the incident) and matrix windows drawn as DOM overlays. Needs uPlot and fw.js. */
(function () {
  "use strict";
  const { el, clock, tzMode, label, KIND_COLORS, colorFor, showCard, hideCard } = window.FW;
  const GIB = 2 ** 30;
  // Same list as collector.readback.downsample.NICE_STEPS: buckets line up across refetches.
  const NICE_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];
  // Every panel reserves the same room for its axes, so the plot areas line up.
  const AXIS_LEFT = 60, AXIS_RIGHT = 52;

  function niceStep(spanS, points) {
    const want = spanS / Math.max(points, 1);
    return NICE_STEPS.find((s) => s >= want) || NICE_STEPS[NICE_STEPS.length - 1];
  }

  const scaleBy = (arr, f) => (arr ? arr.map((v) => (v === null ? null : v * f)) : null);
  const minus = (a, b) => (a && b ? a.map((v, i) => (v === null || b[i] === null ? null : v - b[i])) : null);

  // Each panel: series picked from the downsampled response {t, avg, min, max}, with the unit
  // their legend values carry.
  const PANELS = [
    { id: "memory", title: "Memory (GiB)", always: true, series: [
      { label: "MemAvailable", unit: "GiB", color: "#38a169", get: (s) => scaleBy(s.avg.mem_available, 1 / GIB) },
      { label: "MemAvailable min", unit: "GiB", color: "#68d391", dash: [4, 3], get: (s) => scaleBy(s.min.mem_available, 1 / GIB) },
      { label: "used", unit: "GiB", color: "#dd6b20", get: (s) => scaleBy(minus(s.avg.mem_total, s.avg.mem_available), 1 / GIB) },
      { label: "swap used", unit: "GiB", color: "#9f7aea", get: (s) => scaleBy(s.max.swap_used, 1 / GIB) },
    ] },
    { id: "psi", title: "PSI avg10 (%, max per bucket)", always: true, series: [
      { label: "mem some", unit: "%", color: "#dd6b20", get: (s) => s.max.psi_mem_some_avg10 },
      { label: "mem full", unit: "%", color: "#e53e3e", width: 2, get: (s) => s.max.psi_mem_full_avg10 },
      { label: "cpu some", unit: "%", color: "#4299e1", get: (s) => s.max.psi_cpu_some_avg10 },
      { label: "io some", unit: "%", color: "#38a169", get: (s) => s.max.psi_io_some_avg10 },
      { label: "io full", unit: "%", color: "#319795", get: (s) => s.max.psi_io_full_avg10 },
    ] },
    { id: "gpu", title: "GPU", series: [
      { label: "util", unit: "%", color: "#38a169", get: (s) => s.avg.gpu_util },
      { label: "memory", unit: "GiB", color: "#9f7aea", scale: "y2", get: (s) => scaleBy(s.avg.gpu_mem_used, 1 / GIB) },
    ] },
    { id: "vllm", title: "vLLM", series: [
      { label: "running", unit: "req", digits: 1, color: "#4299e1", get: (s) => s.avg.vllm_running },
      { label: "waiting", unit: "req", digits: 0, color: "#dd6b20", get: (s) => s.max.vllm_waiting },
      { label: "KV cache", unit: "%", digits: 1, color: "#d53f8c", scale: "y2", get: (s) => scaleBy(s.avg.vllm_kv_usage, 100) },
    ] },
  ];

  /** Tick labels: HH:MM (HH:MM:SS below a minute), the date under the first tick of each day. */
  function timeTicks(u, splits, _axis, _space, incr) {
    let day = null;
    return splits.map((ts) => {
      const c = clock(ts), d = c.slice(5, 10), hm = incr < 60 ? c.slice(11) : c.slice(11, 16);
      const out = incr >= 86400 ? d : d === day ? hm : `${hm}\n${d}`;
      day = d;
      return out;
    });
  }

  /** Insert a null row after every gap longer than 1.5 steps so lines break where data stops. */
  function breakGaps(t, columns, step) {
    const outT = [], outCols = columns.map(() => []);
    for (let i = 0; i < t.length; i++) {
      outT.push(t[i]);
      columns.forEach((c, j) => outCols[j].push(c ? c[i] : null));
      if (i + 1 < t.length && t[i + 1] - t[i] > 1.5 * step) {
        outT.push(t[i] + step);
        outCols.forEach((c) => c.push(null));
      }
    }
    return [outT, ...outCols];
  }

  /** Raw sample dicts (incident snapshot) → the downsampled shape with step 1. */
  function seriesFromSamples(samples) {
    const cols = ["mem_total", "mem_available", "mem_free", "swap_used", "psi_mem_some_avg10", "psi_mem_full_avg10",
      "psi_cpu_some_avg10", "psi_io_some_avg10", "psi_io_full_avg10", "gpu_util", "gpu_mem_used",
      "vllm_running", "vllm_waiting", "vllm_kv_usage"];
    const sorted = [...samples].sort((a, b) => a.ts - b.ts);
    const out = { step: 1, t: sorted.map((s) => s.ts), avg: {}, min: {}, max: {} };
    for (const c of cols) {
      if (!sorted.some((s) => s[c] !== null && s[c] !== undefined)) continue;
      const arr = sorted.map((s) => (s[c] === undefined ? null : s[c]));
      out.avg[c] = out.min[c] = out.max[c] = arr;
    }
    return out;
  }

  const cssVar = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

  class Timeline {
    /** container: element to fill; onZoom(since, until) when the user drags a range, onZoomOut()
        on a double-click, onMarker(marker) when a kernel-event marker is clicked. */
    constructor(container, { onZoom, onZoomOut, onMarker, height = 170 } = {}) {
      this.container = container;
      Object.assign(this, { onZoom, onZoomOut, onMarker, height });
      this.plots = [];
      this.since = 0; this.until = 1; this.step = 1; this.focusTs = null;
      this.overlays = { markers: [], phases: [], incidents: [], matrix: [] };
      this.resizeObserver = new ResizeObserver(() => this.resize());
      this.resizeObserver.observe(container);
      window.fwTimeline = { since: 0, until: 0, step: 0, markers: [] };
    }

    width() { return Math.max(200, this.container.clientWidth - 8); }

    /** data: the timeline API response (series, markers, phases, incidents, matrix). */
    setData(data, { since, until }) {
      this.since = since; this.until = until; this.step = data.series.step || data.step || 1;
      // Guard firings are markers of their own kind ("guard"), drawn like kernel events.
      const guard = (data.guard || []).map((g) => ({ ...g, kind: "guard", text: g.text, source: g.dry_run ? "dry-run" : "agent" }));
      this.overlays = {
        markers: [...(data.markers || []), ...guard], phases: data.phases || [],
        incidents: data.incidents || [], matrix: data.matrix || [],
      };
      const s = data.series;
      for (const k of ["avg", "min", "max"]) s[k] = s[k] || {};
      const panels = PANELS.filter((p) => p.always || p.series.some((d) => d.get(s)));
      const key = `${panels.map((p) => p.id).join(",")}|${tzMode()}`;
      if (key !== this.panelKey) this.build(panels, key);
      panels.forEach((panel, i) => {
        const columns = panel.series.map((d) => d.get(s));
        const aligned = breakGaps(s.t || [], columns, this.step);
        this.plots[i].setData(aligned, true);
        const inView = (s.t || []).some((t, j) => t >= since - this.step && t <= until && columns.some((c) => c && c[j] !== null));
        this.plots[i].root.closest(".chart").classList.toggle("empty", !inView);
      });
      window.fwTimeline = {
        since, until, step: this.step,
        markers: this.overlays.markers.map((m) => ({ ts: m.ts, kind: m.kind, text: m.text, line_id: m.line_id })),
        phases: this.overlays.phases.map((p) => ({ start: p.start, end: p.end, phase: p.phase })),
        matrix: this.overlays.matrix.map((m) => ({ run_id: m.run_id, profile: m.profile, kind: m.kind, start: m.start, end: m.end })),
        incidents: this.overlays.incidents.map((i) => ({ id: i.id, start: i.start, end: i.end })),
        empty: this.plots.map((p) => p.root.closest(".chart").classList.contains("empty")),
      };
    }

    /** The index of series si's point nearest x within 1.5 steps, else null (no value shown). */
    near(u, si, closest, x) {
      if (si === 0 || closest === null || closest === undefined) return closest;
      const t = u.data[0], ys = u.data[si], tol = 1.5 * Math.max(this.step, 1);
      let best = null, bestD = Infinity;
      for (let j = Math.max(0, closest - 2); j <= Math.min(t.length - 1, closest + 2); j++) {
        const d = Math.abs(t[j] - x);
        if (ys[j] !== null && ys[j] !== undefined && d <= tol && d < bestD) { best = j; bestD = d; }
      }
      return best;
    }

    build(panels, key) {
      this.plots.forEach((p) => p.destroy());
      this.container.replaceChildren();
      this.panelKey = key;
      const fg = cssVar("--fg") || "#888", grid = cssVar("--line") || "#8884";
      const utc = tzMode() === "utc";
      this.plots = panels.map((panel) => {
        const box = el("div", { class: "chart", dataset: { panel: panel.id } }, el("h3", {}, panel.title),
          el("div", { class: "no-data" }, "No data in this range"));
        this.container.append(box);
        const hasY2 = panel.series.some((d) => d.scale === "y2");
        const opts = {
          width: this.width(), height: this.height,
          cursor: {
            sync: { key: "fw-timeline", setSeries: false }, drag: { x: true, y: false, setScale: false },
            dataIdx: (u, si, closest, x) => this.near(u, si, closest, x),
          },
          select: { show: true },
          scales: { x: { time: true, range: () => [this.since, this.until] }, y: { range: (u, lo, hi) => [Math.min(0, lo ?? 0), Math.max(hi ?? 1, 1e-9) * 1.05] } },
          axes: [
            { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, values: timeTicks, space: 60 },
            { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, size: AXIS_LEFT },
            hasY2 ? { scale: "y2", side: 1, stroke: fg, grid: { show: false }, size: AXIS_RIGHT }
              : { scale: "y", side: 1, stroke: fg, grid: { show: false }, ticks: { show: false }, size: AXIS_RIGHT, values: (u, splits) => splits.map(() => "") },
          ],
          series: [
            { value: (u) => (u.cursor.left >= 0 ? clock(u.posToVal(u.cursor.left, "x")) : "–") },
            ...panel.series.map((d) => ({
              label: d.label, stroke: d.color, width: d.width || 1.5, dash: d.dash, scale: d.scale || "y",
              spanGaps: false, points: { show: false },
              value: (u, v) => (v === null || v === undefined ? "–" : `${v.toFixed(d.digits ?? 2)} ${d.unit}`),
            })),
          ],
          hooks: {
            setSelect: [(u) => this.selected(u)],
            draw: [(u) => this.drawOverlays(u)],
          },
        };
        if (utc) opts.tzDate = (ts) => window.uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC");
        if (hasY2) opts.scales.y2 = { range: (u, lo, hi) => [0, Math.max(hi ?? 1, 1e-9) * 1.05] };
        const plot = new window.uPlot(opts, [[], ...panel.series.map(() => [])], box);
        this.bindOver(plot);
        return plot;
      });
    }

    /** Clicks on the plot (not drags) open the incident under them; double-clicks zoom out. */
    bindOver(u) {
      let downX = null;
      const spanAt = (ev) => {
        const ts = u.posToVal(ev.offsetX, "x");
        return this.overlays.incidents.find((i) => i.start <= ts && ts <= (i.end ?? this.until));
      };
      // Once the pointer moves with the button down (a range drag), the markers let it through:
      // uPlot extends its selection only on moves over the plot itself, so a marker crossed
      // would cut the zoom short. Not before: a click on a marker must stay on the marker.
      u.over.addEventListener("mousedown", (ev) => {
        downX = ev.clientX;
        const moved = (m) => { if (Math.abs(m.clientX - downX) > 3) u.over.classList.add("dragging"); };
        document.addEventListener("mousemove", moved);
        document.addEventListener("mouseup", () => {
          document.removeEventListener("mousemove", moved);
          u.over.classList.remove("dragging");
        }, { once: true });
      });
      u.over.addEventListener("click", (ev) => {
        if (downX === null || Math.abs(ev.clientX - downX) > 3 || ev.target.closest(".fw-marker")) return;
        const inc = spanAt(ev);
        if (inc) location.href = inc.url || `/incidents/${inc.id}`;
      });
      u.over.addEventListener("mousemove", (ev) => { u.over.classList.toggle("on-incident", Boolean(spanAt(ev))); });
      u.over.addEventListener("dblclick", (ev) => { ev.preventDefault(); if (this.onZoomOut) this.onZoomOut(); });
    }

    selected(u) {
      if (u.select.width < 5) return;
      const since = u.posToVal(u.select.left, "x");
      const until = u.posToVal(u.select.left + u.select.width, "x");
      u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
      if (this.onZoom && until > since) this.onZoom(since, until);
    }

    /** Mark ts on every panel (a headline's "lowest MemAvailable" link) and put the cursor there. */
    focus(ts) {
      this.focusTs = ts;
      this.plots.forEach((p) => p.redraw(false, false));
      const first = this.plots[0];
      if (first) first.setCursor({ left: first.valToPos(ts, "x"), top: first.over.clientHeight / 2 });
    }

    resize() {
      const w = this.width();
      this.plots.forEach((p) => p.setSize({ width: w, height: this.height }));
    }

    drawOverlays(u) {
      const over = u.over;
      over.querySelectorAll(".fw-marker, .fw-span, .fw-band, .fw-focus").forEach((n) => n.remove());
      const x = (ts) => u.valToPos(ts, "x");
      const w = over.clientWidth;
      const clampX = (ts) => Math.min(w, Math.max(0, x(ts)));
      const span = (cls, start, end, color, title, dataset) => {
        const left = clampX(start), right = clampX(end ?? this.until);
        if (right <= 0 || left >= w) return null;
        const node = el("div", { class: cls, dataset, "aria-label": title, style: { left: `${left}px`, width: `${Math.max(2, right - left)}px` } });
        if (color) node.style.background = color;
        over.append(node);
        return node;
      };
      for (const m of this.overlays.matrix) {
        span(`fw-span matrix ${m.kind === "startup" ? "startup" : ""}`, m.start, m.end, null,
          `matrix run #${m.run_id} profile ${m.profile}: ${m.kind === "startup" ? "startup" : m.workload} (${m.status})`);
      }
      for (const inc of this.overlays.incidents) {
        const text = `#${inc.id} ${label(inc.kind)} → ${label(inc.resolution || inc.state || "open")}`;
        const node = span("fw-span incident", inc.start, inc.end, null, `incident ${text}: click to open`,
          { incident: inc.id, kind: inc.kind, resolution: inc.resolution || inc.state || "open" });
        // The label inside the span, or to its left when the span ends the plot.
        if (node && over === this.plots[0]?.over) node.append(el("span", { class: `fw-span-label${w - clampX(inc.start) < 150 ? " outside" : ""}` }, text));
      }
      for (const p of this.overlays.phases) span("fw-band", p.start, p.end, phaseColor(p.phase), `vLLM ${p.label || p.phase}`);
      if (this.focusTs !== null && this.focusTs >= this.since && this.focusTs <= this.until) {
        over.append(el("div", { class: "fw-focus", style: { left: `${x(this.focusTs)}px` } }));
      }
      for (const m of this.overlays.markers) {
        if (m.ts < this.since || m.ts > this.until) continue;
        const node = el("div", {
          class: "fw-marker", dataset: { ts: m.ts, kind: m.kind, lineId: m.line_id ?? "" },
          style: { left: `${x(m.ts)}px` }, "aria-label": `${m.kind}: ${m.text}`, tabindex: 0,
        });
        node.style.setProperty("--kind", colorFor(KIND_COLORS, m.kind));
        node.addEventListener("mouseenter", () => showCard(node, markerCard(m)));
        node.addEventListener("mouseleave", hideCard);
        node.addEventListener("click", () => { hideCard(); if (this.onMarker) this.onMarker(m); });
        over.append(node);
      }
    }
  }

  /** What a marker's hover card says: when, what, the line, its meaning, severity and action. */
  function markerCard(m) {
    const grade = [m.severity, m.action && m.action !== "none" ? `action: ${label(m.action)}` : null].filter(Boolean).join(" · ");
    return [
      el("div", { class: "muted" }, `${clock(m.ts)} · ${m.kind}${m.source ? ` · ${m.source}` : ""}`),
      el("div", { class: "mono" }, m.text),
      m.meaning ? el("div", {}, m.meaning) : null,
      grade ? el("div", { class: "muted" }, grade) : null,
      m.vllm_phase ? el("div", { class: "muted" }, `vLLM was ${label(m.vllm_phase)}`) : null,
    ];
  }

  // collector.vllm phases
  const PHASE_COLORS = {
    starting: "#a0aec0", loading_weights: "#d69e2e", loading_drafter: "#dd6b20", profiling: "#805ad5",
    capturing_cuda_graphs: "#b7791f", serving: "#38a169", stopped: "#718096", failed: "#e53e3e",
  };
  const phaseColor = (p) => PHASE_COLORS[p] || "#a0aec0";

  /** The kinds of the markers given (only those present), or a word that there are none. */
  function kindLegend(target, markers) {
    const kinds = [...new Set((markers || []).map((m) => m.kind))];
    target.replaceChildren(...(kinds.length
      ? [el("span", {}, "kernel events:"), ...kinds.map((k) => el("span", { dataset: { kind: k } }, el("i", { style: { background: colorFor(KIND_COLORS, k) } }), label(k)))]
      : [el("span", {}, "no kernel events in view")]));
  }

  window.FW.Timeline = Timeline;
  window.FW.niceStep = niceStep;
  window.FW.seriesFromSamples = seriesFromSamples;
  window.FW.kindLegend = kindLegend;
})();
