/* freezewatch timeline charts: uPlot panels on one shared time axis (synced cursor,
   drag-to-zoom reported to the page), with kernel-event markers, vLLM phase bands and
   incident/matrix spans drawn as DOM overlays. Needs uPlot (vendored) and fw.js. */
(function () {
  "use strict";
  const { el, clock, KIND_COLORS, colorFor } = window.FW;
  const GIB = 2 ** 30;
  // Same list as collector.services.downsample.NICE_STEPS: buckets line up across refetches.
  const NICE_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];

  function niceStep(spanS, points) {
    const want = spanS / Math.max(points, 1);
    return NICE_STEPS.find((s) => s >= want) || NICE_STEPS[NICE_STEPS.length - 1];
  }

  const scaleBy = (arr, f) => (arr ? arr.map((v) => (v === null ? null : v * f)) : null);
  const minus = (a, b) => (a && b ? a.map((v, i) => (v === null || b[i] === null ? null : v - b[i])) : null);

  // Each panel: series picked from the downsampled response {t, avg, min, max}.
  const PANELS = [
    { id: "memory", title: "Memory (GiB)", always: true, series: [
      { label: "MemAvailable", color: "#2f855a", get: (s) => scaleBy(s.avg.mem_available, 1 / GIB) },
      { label: "MemAvailable min", color: "#68d391", dash: [4, 3], get: (s) => scaleBy(s.min.mem_available, 1 / GIB) },
      { label: "used", color: "#c05621", get: (s) => scaleBy(minus(s.avg.mem_total, s.avg.mem_available), 1 / GIB) },
      { label: "swap used", color: "#805ad5", get: (s) => scaleBy(s.max.swap_used, 1 / GIB) },
    ] },
    { id: "psi", title: "PSI avg10 (%, max per bucket)", always: true, series: [
      { label: "mem some", color: "#dd6b20", get: (s) => s.max.psi_mem_some_avg10 },
      { label: "mem full", color: "#e53e3e", width: 2, get: (s) => s.max.psi_mem_full_avg10 },
      { label: "cpu some", color: "#3182ce", get: (s) => s.max.psi_cpu_some_avg10 },
      { label: "io some", color: "#38a169", get: (s) => s.max.psi_io_some_avg10 },
      { label: "io full", color: "#2c7a7b", get: (s) => s.max.psi_io_full_avg10 },
    ] },
    { id: "gpu", title: "GPU", series: [
      { label: "util %", color: "#38a169", get: (s) => s.avg.gpu_util },
      { label: "memory GiB", color: "#805ad5", scale: "y2", get: (s) => scaleBy(s.avg.gpu_mem_used, 1 / GIB) },
    ] },
    { id: "vllm", title: "vLLM", series: [
      { label: "running", color: "#3182ce", get: (s) => s.avg.vllm_running },
      { label: "waiting", color: "#dd6b20", get: (s) => s.max.vllm_waiting },
      { label: "KV cache %", color: "#b83280", scale: "y2", get: (s) => scaleBy(s.avg.vllm_kv_usage, 100) },
    ] },
  ];

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
    /** container: element to fill; onZoom(since, until) when the user drags a range. */
    constructor(container, { onZoom, height = 170 } = {}) {
      this.container = container;
      this.onZoom = onZoom;
      this.height = height;
      this.plots = [];
      this.since = 0; this.until = 1;
      this.overlays = { markers: [], phases: [], incidents: [], matrix: [] };
      this.tip = el("div", { class: "fw-tip", hidden: true });
      document.body.append(this.tip);
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
      const key = panels.map((p) => p.id).join(",");
      if (key !== this.panelKey) this.build(panels, key);
      panels.forEach((panel, i) => {
        const aligned = breakGaps(s.t || [], panel.series.map((d) => d.get(s)), this.step);
        this.plots[i].setData(aligned, true);
      });
      window.fwTimeline = {
        since, until, step: this.step,
        markers: this.overlays.markers.map((m) => ({ ts: m.ts, kind: m.kind, text: m.text })),
        phases: this.overlays.phases.map((p) => ({ start: p.start, end: p.end, phase: p.phase })),
        matrix: this.overlays.matrix.map((m) => ({ run_id: m.run_id, profile: m.profile, kind: m.kind, start: m.start, end: m.end })),
      };
    }

    build(panels, key) {
      this.plots.forEach((p) => p.destroy());
      this.container.replaceChildren();
      this.panelKey = key;
      const fg = cssVar("--fg") || "#888", grid = cssVar("--line") || "#8884";
      this.plots = panels.map((panel) => {
        const box = el("div", { class: "chart", dataset: { panel: panel.id } }, el("h3", {}, panel.title));
        this.container.append(box);
        const hasY2 = panel.series.some((d) => d.scale === "y2");
        const opts = {
          width: this.width(), height: this.height,
          cursor: { sync: { key: "fw-timeline", setSeries: false }, drag: { x: true, y: false, setScale: false } },
          select: { show: true },
          scales: { x: { time: true, range: () => [this.since, this.until] }, y: { range: (u, lo, hi) => [Math.min(0, lo ?? 0), Math.max(hi ?? 1, 1e-9) * 1.05] } },
          axes: [
            { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } },
            { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, size: 48 },
            ...(hasY2 ? [{ scale: "y2", side: 1, stroke: fg, grid: { show: false }, size: 48 }] : []),
          ],
          series: [
            { value: (u, v) => (v === null ? "–" : clock(v)) },
            ...panel.series.map((d) => ({
              label: d.label, stroke: d.color, width: d.width || 1.5, dash: d.dash, scale: d.scale || "y",
              spanGaps: false, points: { show: false }, value: (u, v) => (v === null ? "–" : v.toFixed(2)),
            })),
          ],
          hooks: {
            setSelect: [(u) => this.selected(u)],
            draw: [(u) => this.drawOverlays(u)],
          },
        };
        if (hasY2) opts.scales.y2 = { range: (u, lo, hi) => [0, Math.max(hi ?? 1, 1e-9) * 1.05] };
        return new window.uPlot(opts, [[], ...panel.series.map(() => [])], box);
      });
    }

    selected(u) {
      if (u.select.width < 5) return;
      const since = u.posToVal(u.select.left, "x");
      const until = u.posToVal(u.select.left + u.select.width, "x");
      u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
      if (this.onZoom && until > since) this.onZoom(since, until);
    }

    resize() {
      const w = this.width();
      this.plots.forEach((p) => p.setSize({ width: w, height: this.height }));
    }

    drawOverlays(u) {
      const over = u.over;
      over.querySelectorAll(".fw-marker, .fw-span, .fw-band").forEach((n) => n.remove());
      const x = (ts) => u.valToPos(ts, "x");
      const w = over.clientWidth;
      const clampX = (ts) => Math.min(w, Math.max(0, x(ts)));
      const span = (cls, start, end, color, title, dataset) => {
        const left = clampX(start), right = clampX(end ?? this.until);
        if (right <= 0 || left >= w) return;
        const node = el("div", { class: cls, title, dataset, style: { left: `${left}px`, width: `${Math.max(2, right - left)}px` } });
        if (color) node.style.background = color;
        over.append(node);
      };
      for (const m of this.overlays.matrix) {
        span(`fw-span matrix ${m.kind === "startup" ? "startup" : ""}`, m.start, m.end, null,
          `matrix run #${m.run_id} profile ${m.profile}: ${m.kind === "startup" ? "startup" : m.workload} (${m.status})`);
      }
      for (const inc of this.overlays.incidents) {
        span("fw-span incident", inc.start, inc.end, null, `incident ${inc.id}: ${inc.kind} ${inc.resolution || "open"}`,
          { incident: inc.id, kind: inc.kind, resolution: inc.resolution || inc.state || "open" });
      }
      for (const p of this.overlays.phases) span("fw-band", p.start, p.end, phaseColor(p.phase), `vLLM ${p.label || p.phase}`);
      for (const m of this.overlays.markers) {
        if (m.ts < this.since || m.ts > this.until) continue;
        const node = el("div", {
          class: "fw-marker", dataset: { ts: m.ts, kind: m.kind },
          style: { left: `${x(m.ts)}px` }, "aria-label": `${m.kind}: ${m.text}`,
        });
        node.style.setProperty("--kind", colorFor(KIND_COLORS, m.kind));
        node.addEventListener("mouseenter", (ev) => this.showTip(ev, m));
        node.addEventListener("mouseleave", () => { this.tip.hidden = true; });
        over.append(node);
      }
    }

    showTip(ev, m) {
      this.tip.replaceChildren(
        el("div", { class: "muted" }, `${clock(m.ts)} · ${m.kind}${m.source ? ` · ${m.source}` : ""}`),
        el("div", { class: "mono" }, m.text),
        m.meaning ? el("div", {}, m.meaning) : null,
        m.vllm_phase ? el("div", { class: "muted" }, `vLLM was ${m.vllm_phase.replace(/_/g, " ")}`) : null,
      );
      this.tip.hidden = false;
      const r = ev.currentTarget.getBoundingClientRect();
      this.tip.style.left = `${Math.min(r.left + 10, window.innerWidth - this.tip.offsetWidth - 8)}px`;
      this.tip.style.top = `${r.top + 12}px`;
    }
  }

  // collector.services.vllm_log.PHASES
  const PHASE_COLORS = {
    starting: "#a0aec0", loading_weights: "#d69e2e", loading_drafter: "#dd6b20", profiling: "#805ad5",
    capturing_cuda_graphs: "#b7791f", serving: "#38a169", stopped: "#718096", failed: "#e53e3e",
  };
  const phaseColor = (p) => PHASE_COLORS[p] || "#a0aec0";

  function kindLegend(target) {
    target.replaceChildren(...Object.entries(KIND_COLORS).map(([k, c]) => el("span", {}, el("i", { style: { background: c } }), k)));
  }

  window.FW.Timeline = Timeline;
  window.FW.niceStep = niceStep;
  window.FW.seriesFromSamples = seriesFromSamples;
  window.FW.kindLegend = kindLegend;
})();
