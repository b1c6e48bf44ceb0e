/* One incident: the last 120 s before the loss as charts and lines, probes, resolution,
   post-mortem artifacts, alert deliveries.

   GET /api/v1/incidents/{id} (collector/services/incident_views.py) → the list shape plus
   {"window": {"since", "until"}, "markers", "phases", "matrix" (host timeline shapes in the
    window), "snapshot": {"samples": [sample dicts], "lines": [line dicts], "context":
    {"vllm", "matrix_run"}} | null, "probes": [{"name", "ok", "detail", "duration_s"}],
    "artifacts": [{"name", "argv", "exit_status", "duration_s", "size", "stderr", "truncated",
                   "error", "attempts", "collected_at", "url"}]   (url + "?download=1": attachment),
    "deliveries": [{"event", "target", "state", "attempts", "last_status", "last_error",
                    "delivered_at", "next_attempt_at", "log": [{"at", "attempt", "ok", "status", "error"}]}],
    "postmortem": {"state", "attempts"}, "collector_down", "shutdown", "agent_restart",
    "kernel_alive": {"last_netconsole_at", "seconds_after_last_heartbeat"} | null,
    "late_evidence": [line dicts of the incident's boot received after it opened]}.
   Without snapshot samples the charts fall back to the host timeline API for the window. */
(function () {
  "use strict";
  const { api, el, clock, duration, now, pageConfig, notice, listOf, INCIDENT_KIND_COLORS, RESOLUTION_COLORS, colorFor } = window.FW;
  const cfg = pageConfig();

  function table(id, rows, cols, empty) {
    const tbody = document.querySelector(`#${id} tbody`);
    tbody.replaceChildren(...(rows.length ? rows.map((r) => el("tr", {}, cols.map((c) => c(r))))
      : [el("tr", {}, el("td", { colspan: cols.length, class: "muted" }, empty))]));
  }
  const td = (v, cls) => el("td", { class: cls }, v ?? "–");
  const size = (b) => (b == null ? "–" : b < 1024 ? `${b} B` : b < 2 ** 20 ? `${(b / 1024).toFixed(1)} KiB` : `${(b / 2 ** 20).toFixed(1)} MiB`);
  const secs = (s) => (s == null ? "–" : s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(2)} s`);
  const label = (s) => String(s).replace(/_/g, " ");
  const outcome = (inc) => inc.resolution || inc.state || "open";
  const RESOLUTION_TEXT = {
    rebooted: "The host came back on a new boot: it rebooted (or was rebooted) while silent.",
    agent_recovered: "The agent came back on the same boot: only the agent had stopped.",
    network_partition: "Same boot, and the agent's spooled samples cover the silence: the host ran on, the network between it and the collector was cut.",
    stall: "Same boot, but the agent's own samples have a hole: the host itself stopped (a stall) and resumed.",
    planned_reboot: "Planned silence (the agent announced its stop, or the collector asked for the reboot) ending on a new boot.",
    returned: "Planned silence ending on the same boot.",
    unpaused: "Monitoring was paused for maintenance and resumed.",
  };

  function vllmText(ctx) {
    const v = ctx && ctx.vllm;
    const first = Array.isArray(v) ? v[0] : v;
    if (!first) return "–";
    const parts = [first.health || "?"];
    if (first.running != null) parts.push(`${first.running} running / ${first.waiting ?? 0} waiting`);
    if (first.kv_usage != null) parts.push(`KV ${(first.kv_usage * 100).toFixed(0)} %`);
    return parts.join(" · ");
  }

  function summary(inc) {
    const kindTag = document.getElementById("inc-kind");
    kindTag.textContent = `${label(inc.kind)} → ${label(outcome(inc))}`;
    kindTag.style.borderLeftColor = colorFor(RESOLUTION_COLORS, outcome(inc));
    const snap = inc.snapshot || {};
    const runs = listOf(inc.matrix, "matrix");
    const lastPhase = listOf(inc.phases, "phases").at(-1);
    const facts = [
      ["Host", [el("a", { href: `/hosts/${encodeURIComponent(inc.host)}` }, inc.host), inc.simulated ? [" ", el("span", { class: "tag" }, "simulated")] : null]],
      ["Kind", el("span", { class: "tag kind", style: { borderLeftColor: colorFor(INCIDENT_KIND_COLORS, inc.kind) } }, label(inc.kind))],
      ["Resolution", inc.resolution ? [el("span", { class: "tag kind", style: { borderLeftColor: colorFor(RESOLUTION_COLORS, inc.resolution) } }, label(inc.resolution)),
        " ", el("span", { class: "muted" }, RESOLUTION_TEXT[inc.resolution] || "")]
        : el("strong", { class: "error" }, inc.state === "resolving" ? "resolving: heartbeats are back, waiting for the agent's spool replay to tell partition from stall" : "open: the host is still silent")],
      ["Last heartbeat", clock(inc.last_heartbeat_at)], ["Late", clock(inc.late_at)], ["Opened", clock(inc.opened_at)],
      ["Back", clock(inc.returned_at)], ["Resolved", clock(inc.resolved_at)],
      ["Downtime", inc.downtime_s != null ? duration(inc.downtime_s) : `${duration(now() - inc.start)} so far`],
    ];
    if (inc.stall_s != null) facts.push(["Stall", duration(inc.stall_s)]);
    facts.push(["Boot", `${inc.boot_id || "?"}${inc.return_boot_id && inc.return_boot_id !== inc.boot_id ? ` → ${inc.return_boot_id}` : ""}`]);
    facts.push(["vLLM", [vllmText(snap.context), lastPhase ? ` · ${lastPhase.label || lastPhase.phase}` : ""]]);
    if (runs.length) facts.push(["Matrix run", runs.map((r) => el("a", { href: r.url }, `#${r.run_id} ${r.profile} (${r.kind === "startup" ? "startup" : r.workload}) `))]);
    if (inc.kernel_alive) facts.push(["Kernel alive", `last netconsole line ${Math.round(inc.kernel_alive.seconds_after_last_heartbeat)} s after the last heartbeat (${clock(inc.kernel_alive.last_netconsole_at)})`]);
    for (const p of inc.power_cycles || []) facts.push(["Power cycle", `${(p.argv || []).join(" ")} after ${p.away_s} s away (matrix run #${p.run_id}): exit ${p.exit_status ?? "–"}`]);
    if (inc.agent_restart) facts.push(["Agent restart", inc.agent_restart.ok ? "restarted over SSH" : `failed: ${inc.agent_restart.error || inc.agent_restart.stderr || "?"}`]);
    const notes = [];
    if (inc.collector_down) {
      notes.push(el("p", { class: "notice", id: "collector-down" }, "The collector itself was down when this host's heartbeats stopped (its last heartbeat predates the collector's start): the silence may be partly the collector's own downtime."));
    }
    if (inc.shutdown) notes.push(el("p", { class: "notice" }, "The agent announced a shutdown before the silence."));
    document.getElementById("inc-summary").replaceChildren(...notes, el("dl", { class: "kv" }, facts.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])));
  }

  function lateEvidence(inc) {
    table("inc-late", listOf(inc.late_evidence, "late_evidence"), [(l) => td(clock(l.ts), "mono"), (l) => td(clock(l.received_at), "mono"),
      (l) => td(l.fields && l.fields.pstore_file ? `pstore ${l.fields.pstore_file}` : l.source), (l) => td(l.text, "mono text")],
      "Nothing of this boot arrived after the incident opened.");
  }

  async function charts(inc) {
    const { since, until } = inc.window || { since: inc.start - 120, until: inc.start + 5 };
    const timeline = new window.FW.Timeline(document.getElementById("charts"), { height: 150 });
    window.FW.kindLegend(document.getElementById("kind-legend"));
    const span = { id: inc.id, start: inc.start, end: inc.end, kind: inc.kind, resolution: inc.resolution, url: inc.url };
    const samples = listOf(inc.snapshot && inc.snapshot.samples, "samples");
    let lines = listOf(inc.snapshot && inc.snapshot.lines, "lines");
    if (samples.length) {
      timeline.setData({ series: window.FW.seriesFromSamples(samples), markers: inc.markers || [], guard: inc.guard || [], phases: inc.phases || [], matrix: inc.matrix || [], incidents: [span] }, { since, until });
    } else {
      const path = `/api/v1/hosts/${encodeURIComponent(inc.host)}`;
      timeline.setData(await api(`${path}/timeline`, { params: { since, until, step: 1 } }), { since, until });
      if (!lines.length) lines = (await api(`${path}/lines`, { params: { since, until, limit: 1000 } })).lines || [];
    }
    document.getElementById("snapshot-note").textContent = samples.length
      ? `${samples.length} samples and ${lines.length} lines kept when the incident opened (${clock(since)} – ${clock(until, false)}).`
      : "No snapshot samples: the charts show what the collector has for this window.";
    table("inc-lines", lines, [(l) => td(clock(l.ts), "mono"), (l) => td(l.source), (l) => td(l.priority), (l) => td(l.text, "mono text")], "No lines in the last 120 s.");
  }

  function probes(inc) {
    table("inc-probes", listOf(inc.probes, "probes"), [(p) => td(p.name), (p) => td(p.ok ? "answered" : "failed", p.ok ? "status-up" : "status-lost"),
      (p) => td(secs(p.duration_s), "num"), (p) => td(p.detail, "mono")],
      "No probes configured for this host (no SSH address or vLLM URL): the silence alone decided.");
  }

  function artifacts(inc) {
    const pm = inc.postmortem || {};
    const state = { none: "not needed (no reboot)", pending: "pending", running: "running", done: "done", failed: "failed" }[pm.state] || pm.state || "–";
    document.getElementById("postmortem-state").textContent = `Post-mortem: ${state}${pm.attempts ? ` after ${pm.attempts} attempt${pm.attempts > 1 ? "s" : ""}` : ""}.`;
    const dl = (a) => `${a.url}${a.url.includes("?") ? "&" : "?"}download=1`;
    table("inc-artifacts", listOf(inc.artifacts, "artifacts"), [
      (a) => td(a.name, "mono"), (a) => td(a.argv ? a.argv.join(" ") : null, "mono text"),
      (a) => el("td", { class: a.exit_status === 0 ? "num status-up" : "num status-lost", title: a.stderr || null }, a.error || (a.exit_status ?? "–")),
      (a) => td(`${size(a.size)}${a.truncated ? " (truncated)" : ""}`, "num"), (a) => td(secs(a.duration_s), "num"),
      (a) => td(clock(a.collected_at)),
      (a) => el("td", {}, a.size ? [el("a", { href: a.url, target: "_blank", rel: "noopener" }, "view"), " · ", el("a", { href: dl(a), download: "" }, "download")] : "–"),
    ], pm.state === "none" ? "No post-mortem: artifacts are collected over SSH after a reboot." : "No artifacts yet.");
  }

  function deliveries(inc) {
    const attempts = (d) => listOf(d.log, "log").map((x) => el("div", { class: "mono" },
      `${clock(x.at, false)} #${x.attempt}: ${x.ok ? "ok" : "failed"}${!x.ok && x.error ? `: ${x.error}` : x.status ? ` HTTP ${x.status}` : ""}`));
    table("inc-deliveries", listOf(inc.deliveries, "deliveries"), [
      (d) => td(d.event), (d) => td(d.target, "mono"),
      (d) => td(d.state, d.state === "delivered" ? "status-up" : d.state === "failed" ? "status-lost" : "status-late"),
      (d) => td(d.attempts, "num"), (d) => td(d.delivered_at ? clock(d.delivered_at) : d.state === "pending" ? `next ${clock(d.next_attempt_at, false)}` : null),
      (d) => el("td", {}, attempts(d)),
    ], "No alert deliveries (no webhook targets, or a planned silence).");
  }

  async function load() {
    let inc;
    try {
      inc = await api(`/api/v1/incidents/${cfg.incident}`);
    } catch (err) {
      notice(document.getElementById("inc-summary"), err.status === 404 ? "No such incident." : err.message);
      return;
    }
    summary(inc);
    lateEvidence(inc);
    probes(inc);
    artifacts(inc);
    deliveries(inc);
    await charts(inc);
    window.fwIncident = inc;  // for tests and curious operators
  }

  load().catch((err) => console.warn("incident:", err.message));
})();
