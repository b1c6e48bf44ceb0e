/* Host timeline: one GET /api/v1/hosts/{name}/timeline per view, the view and the log filters in
   the URL (?range=1h live, or ?from=ISO&to=ISO; source, prio, q, noise), zoom by dragging (a
   history step: Back or a double-click zooms out), an absolute range picker, the host's
   incidents beside the charts, and the log pane over GET /api/v1/hosts/{name}/lines. */
(function () {
  "use strict";
  const { api, el, clock, clockTz, duration, ago, now, poll, pageConfig, niceStep, query, setQuery, label, outcome } = window.FW;
  const { row, toolbar, focusRow, hiddenRow } = window.FW.logs;
  const cfg = pageConfig();
  const hostPath = `/api/v1/hosts/${encodeURIComponent(cfg.host)}`;
  const PRESETS = { "5m": 300, "1h": 3600, "24h": 86400, "7d": 604800 };
  const state = { live: true, span: 3600, since: 0, until: 0, step: null, seq: 0, fitted: false };
  let host = null, pendingFocus = null;
  const chartsEl = document.getElementById("charts");
  const timeline = new window.FW.Timeline(chartsEl, { onZoom: (a, b) => zoom(a, b), onZoomOut: zoomOut, onMarker: focusMarker });
  const filters = toolbar(document.getElementById("log-filters"));

  // ---- the view and the URL -------------------------------------------------------------------
  const iso = (ts) => new Date(ts * 1000).toISOString();
  const spanName = (s) => Object.keys(PRESETS).find((k) => PRESETS[k] === s) || `${Math.round(s)}s`;
  function parseSpan(text) {
    if (PRESETS[text]) return PRESETS[text];
    const m = /^(\d+(?:\.\d+)?)([smhd]?)$/.exec(text || "");
    return m ? Number(m[1]) * { "": 1, s: 1, m: 60, h: 3600, d: 86400 }[m[2]] : null;
  }

  /** The view the URL names, or null. */
  function viewFromUrl() {
    const q = query(), from = Date.parse(q.get("from") || ""), to = Date.parse(q.get("to") || "");
    if (!Number.isNaN(from) && !Number.isNaN(to) && to > from) return { live: false, since: from / 1000, until: to / 1000 };
    const span = parseSpan(q.get("range"));
    return span ? { live: true, span } : null;
  }

  /** The default view, fitted to the data the host has: a new host's few minutes, or the last
      hour it was heard from. */
  function fittedView() {
    const first = host && host.first_sample_ts, last = host && host.latest_sample && host.latest_sample.ts;
    if (first == null) return { live: true, span: 3600 };
    if (last != null && now() - last > 3600) return { live: false, since: last - 3600, until: last + 60, fitted: true };
    const have = now() - first;
    return have < 3600 ? { live: true, span: Math.max(60, Math.ceil(have * 1.1)), fitted: true } : { live: true, span: 3600 };
  }

  function applyView(view) {
    Object.assign(state, { fitted: false }, view);
    const q = query();
    filters.set({ source: q.get("source") || "", prio: q.get("prio") || "", q: q.get("q") || "", noise: q.get("noise") === "1" });
  }

  function writeUrl(push) {
    const view = state.fitted ? { range: null, from: null, to: null }
      : state.live ? { range: spanName(state.span), from: null, to: null } : { range: null, from: iso(state.since), to: iso(state.until) };
    const f = filters.values();
    setQuery({ ...view, source: f.source, prio: f.prio, q: f.q, noise: f.noise ? "1" : null }, { push, state: push ? { fwZoom: true } : undefined });
  }

  function zoom(since, until) {
    Object.assign(state, { live: false, fitted: false, since, until });
    writeUrl(true);
    load();
  }

  function zoomOut() {
    if (history.state && history.state.fwZoom) { history.back(); return; }
    const mid = (state.since + state.until) / 2, half = state.until - state.since;
    zoom(mid - half, Math.min(now(), mid + half));
  }

  window.addEventListener("popstate", () => { applyView(viewFromUrl() || fittedView()); load(); });

  for (const b of document.querySelectorAll("#ranges button[data-span]")) {
    b.addEventListener("click", () => { Object.assign(state, { live: true, fitted: false, span: Number(b.dataset.span) }); writeUrl(true); load(); });
  }
  const fromInput = document.getElementById("range-from"), toInput = document.getElementById("range-to");
  document.getElementById("range-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const since = window.FW.fromInputValue(fromInput.value), until = window.FW.fromInputValue(toInput.value);
    const msg = document.getElementById("range-msg");
    msg.textContent = since === null || until === null ? "write times as YYYY-MM-DD HH:MM:SS" : until > since ? "" : "the end must come after the start";
    if (!msg.textContent) zoom(since, until);
  });

  function markView() {
    for (const b of document.querySelectorAll("#ranges button[data-span]")) {
      b.classList.toggle("active", state.live && !state.fitted && Number(b.dataset.span) === state.span);
    }
    document.getElementById("live-tag").hidden = !state.live;
    const fitted = state.fitted ? " · fitted to the host's data" : "";
    document.getElementById("range-label").textContent =
      `${clockTz(state.since)} → ${clock(state.until)} (${duration(state.until - state.since)}, step ${state.step} s${fitted})`;
    for (const [input, ts] of [[fromInput, state.since], [toInput, state.until]]) {
      if (document.activeElement !== input) input.value = window.FW.inputValue(Math.round(ts));
    }
  }

  // ---- charts, incidents, lines ---------------------------------------------------------------
  async function load() {
    if (state.live) { state.until = now(); state.since = state.until - state.span; }
    const seq = ++state.seq;
    state.step = niceStep(state.until - state.since, chartsEl.clientWidth || 1000);
    markView();
    const params = { since: state.since.toFixed(3), until: state.until.toFixed(3), step: state.step };
    const [data] = await Promise.all([api(`${hostPath}/timeline`, { params }), loadLines(), loadIncidents()]);
    if (seq !== state.seq) return;  // a newer view was asked for meanwhile
    timeline.setData(data, { since: state.since, until: state.until });
    window.FW.kindLegend(document.getElementById("kind-legend"), data.markers.concat((data.guard || []).map((g) => ({ kind: "guard" }))));
    noData(data);
    if (pendingFocus !== null && focusRow(pendingFocus)) pendingFocus = null;
  }

  function noData(data) {
    const box = document.getElementById("no-data"), last = host && host.latest_sample && host.latest_sample.ts;
    const empty = !(data.series.t || []).length;
    box.hidden = !empty;
    if (!empty) return;
    const jump = last != null && (last < state.since || last > state.until)
      ? [" The latest sample is from ", clockTz(last), ` (${ago(last)}): `,
        el("button", { type: "button", class: "link", onclick: () => zoom(last - 3600, last + 60) }, "show the hour before it")]
      : host && host.first_sample_ts == null ? " This host has sent no samples yet." : null;
    box.replaceChildren("No data in this range.", ...[jump].flat().filter(Boolean));
  }

  /** A kernel marker's line in the log pane; not on the page: zoom to ±1 min around it. */
  function focusMarker(m) {
    if (m.line_id == null || focusRow(m.line_id)) return;
    pendingFocus = m.line_id;
    filters.set({ source: "", prio: "", q: "" });
    zoom(m.ts - 60, m.ts + 60);
  }

  async function loadIncidents() {
    const list = await api("/api/v1/incidents", { params: { host: cfg.host, limit: 50 } });
    const items = window.FW.listOf(list, "incidents");
    const target = document.getElementById("incident-list");
    target.replaceChildren(...(items.length ? items.map((i) => {
      const inView = i.start <= state.until && (i.end ?? now()) >= state.since;
      const cause = i.cause ? `${label(i.cause.kind)}${i.cause.nv_err ? ` ${i.cause.nv_err}` : i.cause.xid ? ` ${i.cause.xid}` : ""}` : "no kernel evidence";
      return el("li", { class: inView ? "in-view" : null, dataset: { incident: i.id } },
        el("a", { href: i.url }, `#${i.id} `, el("span", { class: "tag kind", style: { borderLeftColor: window.FW.colorFor(window.FW.RESOLUTION_COLORS, outcome(i)) } }, `${label(i.kind)} → ${label(outcome(i))}`)),
        el("div", { class: "muted" }, `${clock(i.start)} · down ${duration(i.downtime_s ?? (i.end ?? now()) - i.start)}`),
        el("div", { class: "muted" }, cause),
        inView ? null : el("button", { type: "button", class: "link", onclick: () => zoom(i.start - 120, (i.end ?? now()) + 60) }, "show on the charts"));
    }) : [el("li", { class: "muted" }, "No incidents: this host was never silent.")]));
  }

  const linesBody = document.querySelector("#lines tbody"), logCount = document.getElementById("log-count");
  filters.onChange(() => { writeUrl(false); loadLines(); });

  async function loadLines() {
    const limit = 500, f = filters.values();
    const data = await api(`${hostPath}/lines`, { params: {
      since: state.since.toFixed(3), until: state.until.toFixed(3), source: f.source,
      min_priority: f.prio, q: f.q, limit, order: "desc", quiet: f.noise ? null : "true",
    } });
    const lines = data.lines || [];
    const hidden = data.quieted ? [hiddenRow(4, `${data.quieted >= 10000 ? "10,000 or more" : data.quieted} vLLM access-log and canary lines hidden`, () => { filters.set({ noise: true }); writeUrl(false); loadLines(); })] : [];
    linesBody.replaceChildren(...(lines.length ? lines.map((l) => row(l)) : [el("tr", {}, el("td", { colspan: 4, class: "muted" }, "No lines in this range."))]), ...hidden);
    logCount.textContent = data.next_cursor ? `newest ${limit} shown` : `${lines.length} line${lines.length === 1 ? "" : "s"}`;
  }

  // ---- the host ---------------------------------------------------------------------------
  async function refreshHost() {
    host = await api(hostPath);
    const status = document.getElementById("host-status");
    status.textContent = host.status; status.className = `status status-${host.status}`;
    document.getElementById("host-seen").textContent = ago(host.last_seen);
    document.getElementById("host-boot").textContent = host.boot_id || "–";
    pipeline(host);
    clockAndLosses(host);
  }

  // The agent's clock offset (charts correct for it from 2 s on) and what its spool lost, when.
  function clockAndLosses(h) {
    const off = h.clock_offset_s;
    document.getElementById("clock-offset").textContent = off == null ? "–"
      : `agent ${Math.abs(off).toFixed(1)} s ${off >= 0 ? "behind" : "ahead of"} the collector` +
        (h.clock_corrected ? " (times shown corrected)" : "");
    const losses = h.spool_losses || { total: {}, reports: [] };
    const t = losses.total;
    document.getElementById("spool-losses").textContent = !losses.reports.length ? "none"
      : `${t.lines} lines, ${t.samples} samples, ${t.events} events · ` + losses.reports.slice(0, 3)
        .map((r) => `${clock(r.first_ts)}–${clock(r.last_ts)}: ${r.lines} lines, ${r.samples} samples (${r.reasons.join(", ") || "?"})`)
        .join(" · ");
  }

  // "Is the pipeline itself healthy?": canary latency and loss per channel that carries
  // canaries, netconsole loss; hidden when no channel says anything.
  function pipeline(h) {
    const parts = Object.entries(h.canary || {}).filter(([, c]) => c.received + c.lost > 0).map(([channel, c]) =>
      `${channel} canary p50 ${fmtMs(c.p50_ms)} / p99 ${fmtMs(c.p99_ms)}, ${c.lost} lost of ${c.received + c.lost}`);
    const nc = h.netconsole;
    if (nc && nc.received) parts.push(`netconsole ${nc.received} records, ${nc.lost_msgid} lost (msgid gaps)`);
    document.getElementById("pipeline-figures").textContent = parts.join(" · ");
    document.getElementById("pipeline").hidden = !parts.length;
  }

  function fmtMs(ms) { return ms == null ? "–" : `${Math.round(ms)} ms`; }

  async function start() {
    await refreshHost().catch((err) => console.warn("host:", err.message));
    applyView(viewFromUrl() || fittedView());
    // The first load, tried again every 2 s until it works (a collector restarting, a dropped
    // connection); then the live tail refetches the moving window at about the step (2 s …
    // 30 s) and other views stay put.
    let loaded = false;
    poll(async () => {
      if (!loaded) { await load(); loaded = true; return; }
      if (state.live) await Promise.all([load(), refreshHost()]);
    }, () => (loaded ? Math.min(30000, Math.max(2000, (state.step || 1) * 1000)) : 2000));
  }
  start().catch((err) => console.warn("host page:", err.message));
})();
