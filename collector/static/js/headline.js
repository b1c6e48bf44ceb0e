/* The incident page's verdict block: kind → resolution, downtime, and what happened (the
   window's kernel events newest first with meaning, severity and action; the lowest
   MemAvailable and highest PSI before the loss; vLLM's phase and last startup plan; the matrix
   run; the last kernel line; the post-mortem). Every item links to its place in the evidence
   below (#line-ID rows, the charts). Needs fw.js and logs.js. */
(function () {
  "use strict";
  const { el, clock, clockTz, duration, now, gib, num, label, outcome, colorFor, listOf, INCIDENT_KIND_COLORS, RESOLUTION_COLORS } = window.FW;
  const SHOWN_EVENTS = 6;
  const RESOLUTION_TEXT = {
    rebooted: "The host came back on a new boot: it rebooted (or was rebooted) while silent.",
    agent_recovered: "The agent came back on the same boot: only the agent had stopped.",
    network_partition: "Same boot, and the agent's spooled samples cover the silence: the host ran on, the network between it and the collector was cut.",
    stall: "Same boot, but the agent's own samples have a hole: the host itself stopped (a stall) and resumed.",
    planned_reboot: "Planned silence (the agent announced its stop, or the collector asked for the reboot) ending on a new boot.",
    returned: "Planned silence ending on the same boot.",
    unpaused: "Monitoring was paused for maintenance and resumed.",
  };
  const OPEN_TEXT = {
    open: "Still silent: no heartbeat since the time above. This page follows it live.",
    resolving: "Heartbeats are back; waiting for the agent's spool replay to tell a network cut from a stall.",
  };

  const kindTag = (text, color) => el("span", { class: "tag kind", style: { borderLeftColor: color } }, label(text));
  const at = (ts) => el("span", { class: "mono" }, clock(ts, false));

  /** The link that shows item (a line id, or a time on the charts) in the evidence below. */
  function evidenceLink(text, { lineId, ts, onLine, onTime }) {
    const href = lineId != null ? `#line-${lineId}` : "#charts";
    return el("a", { href, class: "evidence-link", onclick: (ev) => {
      ev.preventDefault();
      if (lineId != null) onLine(lineId); else onTime(ts);
    } }, text);
  }

  function eventItem(e, links) {
    const what = [label(e.kind), e.xid != null ? ` ${e.xid}` : "", e.nv_err ? ` ${e.nv_err}` : ""].join("");
    const grade = [e.severity ? el("span", { class: `tag severity severity-${e.severity}` }, e.severity) : null,
      e.action && e.action !== "none" ? el("span", { class: "tag action" }, `action: ${label(e.action)}`) : null];
    const phase = e.vllm && e.vllm.phase ? el("span", { class: "muted" }, ` during vLLM ${label(e.vllm.phase)}`) : null;
    return el("li", { dataset: { kind: e.kind, ts: e.ts } },
      evidenceLink(clock(e.ts, false), { lineId: e.line && e.line.id, ts: e.ts, ...links }), " ",
      kindTag(what, colorFor(window.FW.KIND_COLORS, e.kind)), grade, phase,
      e.meaning ? el("div", { class: "meaning" }, e.meaning) : null,
      e.line ? el("div", { class: "mono text" }, e.line.text) : null);
  }

  /** Lowest MemAvailable and highest PSI full/some of the samples before the loss. */
  function extremes(samples) {
    const pick = (key, better) => samples.reduce((best, s) => (s[key] == null ? best : !best || better(s[key], best[key]) ? s : best), null);
    return {
      mem: pick("mem_available", (a, b) => a < b),
      psiFull: pick("psi_mem_full_avg10", (a, b) => a > b),
      psiSome: pick("psi_mem_some_avg10", (a, b) => a > b),
    };
  }

  function beforeLoss(samples, links) {
    if (!samples.length) return el("span", { class: "muted" }, "no samples kept from before the loss");
    const x = extremes(samples), items = [];
    if (x.mem) items.push(["lowest MemAvailable ", evidenceLink(gib(x.mem.mem_available), { ts: x.mem.ts, ...links }), " at ", at(x.mem.ts)]);
    if (x.psiFull) items.push(["highest PSI memory full ", evidenceLink(`${num(x.psiFull.psi_mem_full_avg10, 1)} %`, { ts: x.psiFull.ts, ...links }), " at ", at(x.psiFull.ts)]);
    if (x.psiSome) items.push(["some ", evidenceLink(`${num(x.psiSome.psi_mem_some_avg10, 1)} %`, { ts: x.psiSome.ts, ...links })]);
    const last = samples.reduce((a, s) => (s.ts > a.ts ? s : a));
    if (last.mem_available != null) items.push(["last sample ", gib(last.mem_available), " at ", at(last.ts)]);
    return items.flatMap((item, i) => (i ? [" · ", ...item] : item));
  }

  function vllmLine(inc, links) {
    const phase = listOf(inc.phases, "phases").at(-1), start = inc.vllm_start;
    const parts = [];
    if (phase) parts.push(["phase ", evidenceLink(label(phase.label || phase.phase), { ts: phase.start, ...links }), ` since ${clock(phase.start, false)}`]);
    const health = inc.snapshot && inc.snapshot.context && listOf(inc.snapshot.context.vllm, "vllm")[0];
    if (health) parts.push([`health ${health.health || "?"}`, health.running != null ? `, ${health.running} running / ${health.waiting ?? 0} waiting` : ""]);
    if (start) {
      const plan = [`last start ${clock(start.started_ts, false)}: ${label(start.outcome || "?")}`];
      if (start.model_load_gib != null) plan.push(`model ${num(start.model_load_gib, 2)} GiB`);
      if (start.drafter_loaded) plan.push("drafter loaded");
      if (start.kv_cache_gib != null) plan.push(`KV cache ${num(start.kv_cache_gib, 2)} GiB${start.kv_cache_tokens ? ` (${Number(start.kv_cache_tokens).toLocaleString("en")} tokens)` : ""}`);
      if (start.cuda_graph_estimate_gib != null) plan.push(`CUDA graph estimate ${num(start.cuda_graph_estimate_gib, 2)} GiB${start.cuda_graph_estimate_gib < 0 ? " (negative: an anomaly)" : ""}`);
      if (start.error) plan.push(`error: ${start.error}`);
      parts.push([plan.join(", ")]);
    }
    return parts.length ? parts.flatMap((p, i) => (i ? [" · ", ...p] : p)) : el("span", { class: "muted" }, "no vLLM seen on this host");
  }

  /** The matrix run and profile the host was in when it went silent: the run window around
      the loss, else the unit the runner noted on the snapshot, else the last window before it. */
  function matrixLine(inc) {
    const runs = listOf(inc.matrix, "matrix"), ctx = inc.snapshot && inc.snapshot.context && inc.snapshot.context.matrix_run;
    const unit = (profile, rep) => `${profile}${rep > 1 ? ` #${rep}` : ""}`;
    const active = runs.filter((r) => r.start <= inc.start && (r.end == null || r.end >= inc.start)).at(-1);
    if (active) {
      return el("a", { href: active.url, dataset: { run: active.run_id } },
        `run #${active.run_id} profile ${unit(active.profile, active.repetition)} (${active.kind === "startup" ? "startup" : `workload ${active.workload}`})`);
    }
    if (ctx && ctx.run_id != null) return el("a", { href: `/matrix/${ctx.run_id}`, dataset: { run: ctx.run_id } }, `run #${ctx.run_id} profile ${unit(ctx.profile, ctx.repetition)}`);
    const before = runs.filter((r) => r.end != null && r.end < inc.start).at(-1);
    return before ? [el("a", { href: before.url, dataset: { run: before.run_id } }, `run #${before.run_id} profile ${unit(before.profile, before.repetition)}`),
      el("span", { class: "muted" }, ` (its ${before.kind === "startup" ? "startup" : `workload ${before.workload}`} ended ${duration(inc.start - before.end)} before the loss)`)] : null;
  }

  /** The newest kernel line before the host came back. */
  function lastKernelLine(lines, inc) {
    const end = inc.end ?? Infinity;
    return lines.filter((l) => window.FW.logs.isKernel(l) && !window.FW.logs.noiseKind(l) && l.ts <= end)
      .reduce((a, l) => (!a || l.ts > a.ts ? l : a), null);
  }

  function postmortemText(inc) {
    const pm = inc.postmortem || {};
    const why = listOf(inc.artifacts, "artifacts").find((a) => a.name === "postmortem-error");
    const attempts = pm.attempts ? ` (${pm.attempts} attempt${pm.attempts > 1 ? "s" : ""})` : "";
    if (pm.state === "none") {
      return inc.state === "resolved" ? "not needed: the host came back without a reboot"
        : "waiting for the host: the journal of the frozen boot and pstore are fetched over SSH once it is back on a new boot";
    }
    if (pm.state === "done") return `done: ${listOf(inc.artifacts, "artifacts").filter((a) => a.name !== "postmortem-error").length} artifacts below${attempts}`;
    if (pm.state === "failed") return `failed${attempts}: ${why && why.error ? why.error : "see the artifacts below"}`;
    if (pm.state === "pending") return `pending: collecting over SSH${attempts}${why && why.error ? `; last try: ${why.error}` : ""}`;
    return `${pm.state || "–"}${attempts}`;
  }

  /** The block; links: {onLine(lineId), onTime(ts)}; lines: the evidence lines. */
  function headline(inc, lines, links) {
    const o = outcome(inc), open = inc.state !== "resolved";
    const downtime = inc.downtime_s ?? now() - inc.start;
    const events = listOf(inc.kernel_events, "kernel_events");
    const samples = listOf(inc.snapshot && inc.snapshot.samples, "samples").filter((s) => s.ts <= (inc.window ? inc.window.until : Infinity));
    const last = lastKernelLine(lines, inc);
    const matrix = matrixLine(inc);
    const rows = [  // [term, what, class of the dd (tests and styles find each by it)]
      ["Before the loss", beforeLoss(samples, links), "before-loss"],
      ["vLLM", vllmLine(inc, links), "vllm"],
      matrix ? ["Matrix", matrix, "matrix"] : null,
      ["Last kernel line", last ? [evidenceLink(clock(last.ts, false), { lineId: last.id, ...links }), " ", el("span", { class: "mono text" }, last.text)] : el("span", { class: "muted" }, "none kept"), "last-kernel"],
      ["Post-mortem", el("span", { id: "postmortem-state" }, postmortemText(inc)), "postmortem"],
    ].filter(Boolean);
    const more = events.length - SHOWN_EVENTS;
    return el("section", { class: `headline ${open ? "is-open" : ""}`, id: "headline", dataset: { state: inc.state, outcome: o } },
      el("div", { class: "verdict" },
        kindTag(inc.kind, colorFor(INCIDENT_KIND_COLORS, inc.kind)), el("span", { class: "arrow" }, "→"),
        kindTag(o, colorFor(RESOLUTION_COLORS, o)), open ? el("span", { class: "tag live", id: "inc-live" }, "live") : null,
        el("span", { class: "downtime" }, open ? "silent for " : "down ", el("strong", { id: "downtime", dataset: { start: inc.start, open: open ? "1" : "" } }, duration(downtime)), open ? " so far" : ""),
        el("span", { class: "muted" }, ` · ${clockTz(inc.start)}${inc.end ? ` → ${clock(inc.end, false)}` : ""}`)),
      el("p", { class: o in RESOLUTION_TEXT ? null : "error" }, RESOLUTION_TEXT[o] || OPEN_TEXT[o] || ""),
      el("h2", {}, "What happened"),
      events.length ? el("ol", { class: "events", id: "headline-events" }, events.slice(0, SHOWN_EVENTS).map((e) => eventItem(e, links)),
        more > 0 ? el("li", { class: "muted" }, `${more} more kernel event${more > 1 ? "s" : ""} in the evidence below`) : null)
        : el("p", { class: "muted", id: "headline-events" }, "No kernel events classified in the window: no kernel evidence of why."),
      el("dl", { class: "kv" }, rows.map(([k, v, cls]) => [el("dt", {}, k), el("dd", { class: cls }, v)])));
  }

  /** Advance the "so far" downtime of an open incident (called every second). */
  function tick() {
    const d = document.getElementById("downtime");
    if (d && d.dataset.open) d.textContent = duration(now() - Number(d.dataset.start));
  }

  window.FW.headline = { headline, tick, RESOLUTION_TEXT };
})();
