/* Host timeline: one GET /api/v1/hosts/{name}/timeline per view (range presets, drag-to-zoom,
   live tail while viewing "now") and the log pane over GET /api/v1/hosts/{name}/lines. */
(function () {
  "use strict";
  const { api, el, clock, duration, ago, now, poll, pageConfig, niceStep } = window.FW;
  const cfg = pageConfig();
  const hostPath = `/api/v1/hosts/${encodeURIComponent(cfg.host)}`;
  const state = { span: 3600, live: true, since: 0, until: 0, seq: 0 };
  const chartsEl = document.getElementById("charts");
  const timeline = new window.FW.Timeline(chartsEl, { onZoom: zoom });
  window.FW.kindLegend(document.getElementById("kind-legend"));

  const rangeButtons = [...document.querySelectorAll("#ranges button[data-span]")];
  for (const b of rangeButtons) {
    b.addEventListener("click", () => { state.span = Number(b.dataset.span); state.live = true; load(); });
  }

  function zoom(since, until) {
    state.live = false;
    state.since = since; state.until = until;
    load();
  }

  function markButtons() {
    for (const b of rangeButtons) b.classList.toggle("active", state.live && Number(b.dataset.span) === state.span);
    document.getElementById("live-tag").hidden = !state.live;
    document.getElementById("range-label").textContent =
      `${clock(state.since)} → ${clock(state.until)} (${duration(state.until - state.since)}, step ${state.step ?? "?"} s)`;
  }

  async function load() {
    if (state.live) { state.until = now(); state.since = state.until - state.span; }
    const seq = ++state.seq;
    const width = chartsEl.clientWidth || 1000;
    state.step = niceStep(state.until - state.since, width);
    markButtons();
    const params = { since: state.since.toFixed(3), until: state.until.toFixed(3), step: state.step };
    const [data] = await Promise.all([api(`${hostPath}/timeline`, { params }), loadLines()]);
    if (seq !== state.seq) return;  // a newer view was asked for meanwhile
    timeline.setData(data, { since: state.since, until: state.until });
  }

  // Log pane
  const fSource = document.getElementById("f-source"), fPrio = document.getElementById("f-priority"), fText = document.getElementById("f-text");
  const linesBody = document.querySelector("#lines tbody"), logCount = document.getElementById("log-count");
  let textTimer = null;
  fSource.addEventListener("change", () => loadLines());
  fPrio.addEventListener("change", () => loadLines());
  fText.addEventListener("input", () => { clearTimeout(textTimer); textTimer = setTimeout(loadLines, 300); });

  async function loadLines() {
    const limit = 500;
    const data = await api(`${hostPath}/lines`, { params: {
      since: state.since.toFixed(3), until: state.until.toFixed(3), source: fSource.value,
      min_priority: fPrio.value, q: fText.value.trim(), limit, order: "desc",
    } });
    const lines = data.lines || [];
    linesBody.replaceChildren(...(lines.length ? lines.map((l) => el("tr", { class: l.priority !== null && l.priority <= 3 ? "prio-hi" : null, dataset: { ts: l.ts } },
      el("td", { class: "mono" }, clock(l.ts)), el("td", {}, l.source), el("td", {}, l.priority ?? ""),
      el("td", { class: "mono text" }, l.text))) : [el("tr", {}, el("td", { colspan: 4, class: "muted" }, "No lines in this range."))]));
    logCount.textContent = data.next_cursor ? `newest ${limit} shown` : `${lines.length} lines`;
  }

  async function refreshHost() {
    const h = await api(hostPath);
    const status = document.getElementById("host-status");
    status.textContent = h.status; status.className = `status status-${h.status}`;
    document.getElementById("host-seen").textContent = ago(h.last_seen);
    document.getElementById("host-boot").textContent = h.boot_id || "–";
    pipeline(h);
    clockAndLosses(h);
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

  // "Is the pipeline itself healthy?": canary latency and loss per channel, netconsole loss.
  function pipeline(h) {
    const parts = Object.entries(h.canary || {}).map(([channel, c]) =>
      `${channel} canary p50 ${fmtMs(c.p50_ms)} / p99 ${fmtMs(c.p99_ms)}, ${c.lost} lost of ${c.received + c.lost}`);
    const nc = h.netconsole;
    if (nc && nc.received) parts.push(`netconsole ${nc.received} records, ${nc.lost_msgid} lost (msgid gaps)`);
    document.getElementById("pipeline-figures").textContent = parts.length ? parts.join(" · ") : "no canary yet";
  }

  function fmtMs(ms) { return ms == null ? "–" : `${Math.round(ms)} ms`; }

  refreshHost();

  // Live tail: refetch the moving window at about the step (2 s … 30 s); zoomed views stay put.
  poll(async () => {
    if (!state.live) return;
    await Promise.all([load(), refreshHost()]);
  }, () => Math.min(30000, Math.max(2000, (state.step || 1) * 1000)));
})();
