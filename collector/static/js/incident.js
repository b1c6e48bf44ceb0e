/* One incident: the verdict first (headline.js), then the evidence (the last 120 s as charts,
   the lines newest first, filtered to kernel lines and errors by default), probes, post-mortem
   artifacts readable inline, alert deliveries. Live while anything is still to come: it polls
   until the incident is resolved, its post-mortem finished and its alerts delivered.

   GET /api/v1/incidents/{id} (collector/incidents/read.py) → the list shape plus
   {"window": {"since", "until"}, "markers", "phases", "matrix", "guard" (host timeline shapes in
    the window), "kernel_events" (newest first), "vllm_start", "snapshot": {"samples", "lines",
    "context": {"vllm", "matrix_run"}} | null, "probes", "artifacts": [{"name", "argv",
    "exit_status", "duration_s", "size", "stderr", "truncated", "error", "attempts",
    "collected_at", "url"}] (url + "?download=1": attachment), "deliveries", "postmortem":
    {"state", "attempts"}, "collector_down", "shutdown", "agent_restart", "kernel_alive",
    "late_evidence": [lines of the incident's boot received after it opened]}.
   Without snapshot samples the charts fall back to the host timeline API for the window. */
(function () {
  "use strict";
  const { api, el, clock, duration, pageConfig, notice, listOf, poll, label, outcome } = window.FW;
  const { row, toolbar, passes, hiddenRow, focusRow, noiseKind } = window.FW.logs;
  const cfg = pageConfig();
  let timeline = null, charted = false, evidenceLines = [], evidenceKey = "", latest = null, latestText = "";
  const filters = toolbar(document.getElementById("log-filters"));
  filters.onChange(drawEvidence);

  function table(id, rows, cols, empty) {
    const tbody = document.querySelector(`#${id} tbody`);
    tbody.replaceChildren(...(rows.length ? rows.map((r) => el("tr", {}, cols.map((c) => c(r))))
      : [el("tr", {}, el("td", { colspan: cols.length, class: "muted" }, empty))]));
  }
  const td = (v, cls) => el("td", { class: cls }, v ?? "–");
  const secs = (s) => (s == null ? "–" : s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(2)} s`);

  // Where the headline's links land: a line of the evidence (shown even if filtered out), or a
  // moment on the charts.
  const links = {
    onLine(id) {
      if (!focusRow(id)) { filters.set({ source: "", prio: "", q: "", noise: true }); drawEvidence(); focusRow(id); }
    },
    onTime(ts) {
      document.getElementById("charts").scrollIntoView({ block: "center" });
      if (timeline) timeline.focus(ts);
    },
  };

  function details(inc) {
    const facts = [
      ["Host", [el("a", { href: `/hosts/${encodeURIComponent(inc.host)}` }, inc.host), inc.simulated ? [" ", el("span", { class: "tag" }, "simulated")] : null]],
      ["Last heartbeat", clock(inc.last_heartbeat_at)], ["Late", clock(inc.late_at)], ["Opened", clock(inc.opened_at)],
      ["Back", clock(inc.returned_at)], ["Resolved", clock(inc.resolved_at)],
    ];
    if (inc.stall_s != null) facts.push(["Stall", duration(inc.stall_s)]);
    facts.push(["Boot", `${inc.boot_id || "?"}${inc.return_boot_id && inc.return_boot_id !== inc.boot_id ? ` → ${inc.return_boot_id} (a new boot)` : ""}`]);
    if (inc.kernel_alive) facts.push(["Kernel alive", `last netconsole line ${Math.round(inc.kernel_alive.seconds_after_last_heartbeat)} s after the last heartbeat (${clock(inc.kernel_alive.last_netconsole_at)})`]);
    for (const p of inc.power_cycles || []) facts.push(["Power cycle", `${(p.argv || []).join(" ")} after ${p.away_s} s away (matrix run #${p.run_id}): exit ${p.exit_status ?? "–"}`]);
    if (inc.agent_restart) facts.push(["Agent restart", inc.agent_restart.ok ? "restarted over SSH" : `failed: ${inc.agent_restart.error || inc.agent_restart.stderr || "?"}`]);
    const notes = [];
    if (inc.collector_down) {
      notes.push(el("p", { class: "notice", id: "collector-down" }, "The collector itself was down when this host's heartbeats stopped (its last heartbeat predates the collector's start): the silence may be partly the collector's own downtime."));
    }
    if (inc.shutdown) notes.push(el("p", { class: "notice" }, "The agent announced a shutdown before the silence."));
    return [...notes, el("details", { class: "facts", open: true }, el("summary", {}, "Details"), el("dl", { class: "kv" }, facts.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])))];
  }

  function summary(inc) {
    document.getElementById("inc-kind").textContent = `${label(inc.kind)} → ${label(outcome(inc))}`;
    document.getElementById("inc-summary").replaceChildren(window.FW.headline.headline(inc, evidenceLines, links), ...details(inc));
  }

  // ---- evidence ---------------------------------------------------------------------------
  /** The snapshot's lines, what arrived later, and the lines of kernel events neither has. */
  function gatherLines(inc) {
    const byId = new Map();
    for (const l of listOf(inc.snapshot && inc.snapshot.lines, "lines")) byId.set(l.id, l);
    for (const l of listOf(inc.late_evidence, "late_evidence")) if (!byId.has(l.id)) byId.set(l.id, { ...l, late: true });
    for (const e of listOf(inc.kernel_events, "kernel_events")) {
      if (e.line && !byId.has(e.line.id)) byId.set(e.line.id, { id: e.line.id, ts: e.ts, source: e.line.source, priority: null, text: e.line.text });
    }
    return [...byId.values()].sort((a, b) => b.ts - a.ts || b.id - a.id);
  }

  function drawEvidence() {
    const f = filters.values(), shown = [], hidden = { noise: 0, other: 0 };
    for (const l of evidenceLines) {
      if (passes(l, f)) shown.push(l);
      else if (noiseKind(l) && !f.noise) hidden.noise += 1;
      else hidden.other += 1;
    }
    const tbody = document.querySelector("#inc-lines tbody");
    const late = (l) => (l.late ? { tag: "late", title: `received ${clock(l.received_at)}, after the incident opened` } : {});
    const rows = shown.map((l) => row(l, late(l)));
    if (hidden.noise) rows.push(hiddenRow(4, `${hidden.noise} vLLM access-log and canary lines collapsed`, () => { filters.set({ noise: true }); drawEvidence(); }));
    if (hidden.other) rows.push(hiddenRow(4, `${hidden.other} more lines hidden by the filters`, () => { filters.set({ source: "", prio: "", q: "" }); drawEvidence(); }));
    tbody.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 4, class: "muted" }, "No lines kept from before the loss."))]));
    document.getElementById("evidence-count").textContent = `${shown.length} of ${evidenceLines.length} lines, newest first`;
  }

  async function charts(inc) {
    const { since, until } = inc.window || { since: inc.start - 120, until: inc.start + 5 };
    timeline = timeline || new window.FW.Timeline(document.getElementById("charts"), { height: 150, onMarker: (m) => links.onLine(m.line_id) });
    const span = { id: inc.id, start: inc.start, end: inc.end, kind: inc.kind, resolution: inc.resolution, url: inc.url };
    const samples = listOf(inc.snapshot && inc.snapshot.samples, "samples");
    let data;
    if (samples.length) {
      data = { series: window.FW.seriesFromSamples(samples), markers: inc.markers || [], guard: inc.guard || [], phases: inc.phases || [], matrix: inc.matrix || [], incidents: [span] };
    } else {
      const path = `/api/v1/hosts/${encodeURIComponent(inc.host)}`;
      data = await api(`${path}/timeline`, { params: { since, until, step: 1 } });
      if (!evidenceLines.length) evidenceLines = (await api(`${path}/lines`, { params: { since, until, limit: 1000, order: "desc" } })).lines || [];
    }
    timeline.setData(data, { since, until });
    charted = true;  // only once drawn: a failed first draw is redone on the next poll
    window.FW.kindLegend(document.getElementById("kind-legend"), data.markers);
    const kept = listOf(inc.snapshot && inc.snapshot.lines, "lines").length;
    document.getElementById("snapshot-note").textContent = samples.length
      ? `${samples.length} samples and ${kept} lines kept when the incident opened (${clock(since)} – ${clock(until, false)}).`
      : "No snapshot samples: the charts show what the collector has for this window.";
  }

  function probes(inc) {
    table("inc-probes", listOf(inc.probes, "probes"), [(p) => td(p.name), (p) => td(p.ok ? "answered" : "failed", p.ok ? "status-up" : "status-lost"),
      (p) => td(secs(p.duration_s), "num"), (p) => td(p.detail, "mono")],
      "No probes configured for this host (no SSH address or vLLM URL): the silence alone decided.");
  }

  function deliveries(inc) {
    const attempts = (d) => listOf(d.log, "log").map((x) => el("div", { class: "mono" },
      `${clock(x.at, false)} #${x.attempt}: ${x.ok ? "ok" : "failed"}${!x.ok && x.error ? `: ${x.error}` : x.status ? ` HTTP ${x.status}` : ""}`));
    table("inc-deliveries", listOf(inc.deliveries, "deliveries"), [
      (d) => td(d.event), (d) => td(d.target, "mono"),
      (d) => td(d.state, d.state === "delivered" ? "status-up" : d.state === "failed" ? "status-lost" : "status-late"),
      (d) => td(d.attempts, "num"), (d) => td(d.delivered_at ? clock(d.delivered_at) : d.state === "pending" ? `next ${clock(d.next_attempt_at, false)}` : null),
      (d) => el("td", {}, attempts(d)),
    ], "No alert deliveries (no alert targets, or a planned silence).");
  }

  /** Anything still to come: the return, the post-mortem, an alert delivery. */
  const settled = (inc) => inc.state === "resolved" && !["pending", "running"].includes((inc.postmortem || {}).state)
    && !listOf(inc.deliveries, "deliveries").some((d) => d.state === "pending" || d.state === "sending");

  async function refresh() {
    let inc;
    try {
      inc = await api(`/api/v1/incidents/${cfg.incident}`);
    } catch (err) {
      // Gone: say so and stop. Anything else (the collector restarting, a dropped connection)
      // is tried again on the next poll; a page already drawn keeps what it shows.
      if (err.status === 404) notice(document.getElementById("inc-summary"), "No such incident.");
      else if (!latest) notice(document.getElementById("inc-summary"), `${err.message}: trying again`);
      return err.status !== 404;
    }
    const text = JSON.stringify(inc);
    if (text === latestText) return !settled(inc);
    const lines = gatherLines(inc), key = lines.map((l) => l.id).join(",");
    if (!charted) {
      evidenceLines = lines;
      await charts(inc);
      evidenceKey = key;
      drawEvidence();
    } else if (key !== evidenceKey && lines.length) {
      evidenceLines = lines;
      evidenceKey = key;
      drawEvidence();
    }
    summary(inc);
    probes(inc);
    window.FW.artifacts.render(inc);
    deliveries(inc);
    latest = inc;
    latestText = text;  // only once drawn: a draw that failed half-way is tried again
    window.fwIncident = inc;  // for tests and curious operators
    document.body.dataset.incidentState = inc.state;
    return !settled(inc);
  }

  let stop = null;
  stop = poll(async () => { if (!(await refresh()) && stop) stop(); }, 2000);
  setInterval(() => { if (latest && latest.state !== "resolved") window.FW.headline.tick(); }, 1000);
})();
