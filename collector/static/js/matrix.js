/* Matrix runs list (/matrix) and one run (/matrix/{id}) over collector/api/matrix.py:

   GET  /api/v1/matrix-presets → {"presets": [{"name", "description", "profiles": {name: desc}, "workloads"}]}
   GET  /api/v1/matrix-runs → [Run];  POST /api/v1/matrix-runs {"preset", "host"} → Run
   GET  /api/v1/matrix-runs/{id} → Run + {"spec", "steps": [Step], "report": MatrixReport}
   POST /api/v1/matrix-runs/{id}/cancel;  GET .../report.md (Markdown);  GET .../latencies
   Run = {"id", "name", "host", "preset", "status": queued|running|succeeded|failed|cancelled|interrupted,
          "created_at", "started_at", "ended_at", "cancel_requested", "error", "progress": {"done", "total"}}
   MatrixReport.profiles[] = collector.matrix.results.ProfileReport as a dict (+ "label"); its serving
     configuration (startup_plan's served fields, requested, config_mismatch) is drawn by served.js;
   MatrixReport.summary = collector.matrix.summary.summarize (k of N per profile, vs the baseline);
   MatrixReport.error: why a failed run failed (shown at the top). */
(function () {
  "use strict";
  const { api, el, clock, duration, num, listOf, poll, pageConfig, notice, KIND_COLORS, colorFor } = window.FW;
  const cfg = pageConfig();
  const ACTIVE = new Set(["queued", "running"]);

  const statusTag = (status) => el("span", { class: `tag run-${status}` }, status || "–");
  const verdictTag = (v) => el("span", { class: `tag verdict-${(v || "none").toLowerCase()}` }, v || "pending");
  const gibs = (v) => (v === null || v === undefined ? "–" : `${Number(v).toFixed(2)} GiB`);
  const secs = (v) => (v === null || v === undefined ? "–" : `${Number(v).toFixed(v < 10 ? 2 : 1)} s`);

  function progress(run) {
    const p = run.progress || {};
    const done = p.done ?? 0, total = p.total ?? 0;
    const frac = total ? Math.min(1, done / total) : 0;
    return el("span", { class: "run-progress", dataset: { done, total } },
      el("span", { class: "progress", title: `${done} of ${total} steps` }, el("span", { style: { width: `${100 * frac}%` } })),
      ` ${done}/${total} steps`);
  }

  async function cancel(id) {
    if (!window.confirm(`Cancel matrix run #${id}? Its remote processes are stopped.`)) return;
    await api(`/api/v1/matrix-runs/${id}/cancel`, { method: "POST" });
  }

  // ---- /matrix -------------------------------------------------------------------------------
  async function listPage() {
    const form = document.getElementById("start-form"), msg = document.getElementById("start-msg");
    const [presets, hosts] = await Promise.all([api("/api/v1/matrix-presets"), api("/api/v1/hosts")]);
    const presetList = listOf(presets, "presets");
    const presetSelect = document.getElementById("m-preset"), about = document.getElementById("preset-about");
    presetSelect.replaceChildren(...presetList.map((p) => el("option", { value: p.name, title: p.description }, p.name)));
    // Hosts without SSH settings are marked: a run there fails before it starts.
    const hostList = listOf(hosts, "hosts"), hostSelect = document.getElementById("m-host");
    const noSsh = (h) => !(h.config && h.config.ssh);
    hostSelect.replaceChildren(...hostList.map((h) => el("option", { value: h.name, dataset: { ssh: noSsh(h) ? "no" : "yes" } }, noSsh(h) ? `${h.name} (no SSH)` : h.name)));
    const help = document.getElementById("m-host-help");
    const explain = () => {
      const h = hostList.find((x) => x.name === hostSelect.value), missing = hostList.filter(noSsh).length;
      help.hidden = !missing;
      help.replaceChildren(...(h && noSsh(h)
        ? [el("strong", { class: "error" }, `${h.name} has no SSH settings: `), "a matrix run starts and stops vLLM on the host over SSH. Give it a login first: ",
          el("code", {}, `freezewatch-collector add-host ${h.name} --update --ssh USER@ADDR --key PATH --trust-host-key`), "."]
        : [`Hosts marked "no SSH" need SSH settings (add-host NAME --update --ssh USER@ADDR --key PATH --trust-host-key) before a matrix run can use them.`]));
    };
    hostSelect.addEventListener("change", explain);
    explain();
    const describe = () => {
      const p = presetList.find((x) => x.name === presetSelect.value);
      about.replaceChildren(...(p ? [el("p", {}, p.description),
        el("p", { class: "muted" }, "Profiles: ", Object.entries(p.profiles || {}).map(([k, d]) => `${k} (${d})`).join(", "),
          p.workloads?.length ? ` · workloads: ${p.workloads.join(", ")}` : "")] : []));
    };
    presetSelect.addEventListener("change", describe);
    describe();
    if (!presetList.length) msg.textContent = "No presets on this collector.";
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const body = { preset: form.preset.value, host: form.host.value };
      if (!window.confirm(`Start preset ${body.preset} on ${body.host}? It stops and restarts the host's vLLM server.`)) return;
      try {
        const run = await api("/api/v1/matrix-runs", { method: "POST", body });
        location.href = `/matrix/${run.id}`;
      } catch (err) { msg.textContent = err.message; }
    });
    const tbody = document.querySelector("#runs tbody");
    poll(async () => {
      const runs = listOf(await api("/api/v1/matrix-runs"), "runs");
      tbody.replaceChildren(...(runs.length ? runs.map((r) => el("tr", { dataset: { run: r.id, status: r.status } },
        el("td", {}, el("a", { href: `/matrix/${r.id}` }, `#${r.id}`)), el("td", {}, r.name || "–"),
        el("td", {}, r.host ? el("a", { href: `/hosts/${encodeURIComponent(r.host)}` }, r.host) : "–"),
        el("td", { class: "hide-narrow" }, r.preset || "spec"),
        el("td", {}, statusTag(r.status), r.cancel_requested && ACTIVE.has(r.status) ? el("span", { class: "muted" }, " cancelling") : null),
        el("td", {}, progress(r)), el("td", { class: "hide-narrow" }, clock(r.started_at ?? r.created_at)),
        el("td", { class: "hide-narrow" }, clock(r.ended_at)),
        el("td", {}, ACTIVE.has(r.status) ? el("button", { type: "button", onclick: () => cancel(r.id).catch((e) => window.alert(e.message)) }, "Cancel") : null)))
        : [el("tr", {}, el("td", { colspan: 9, class: "muted" }, "No matrix runs yet."))]));
    }, 5000);
  }

  // ---- /matrix/{id} --------------------------------------------------------------------------
  function kvTable(obj) {
    const entries = Object.entries(obj || {}).filter(([, v]) => v !== undefined);
    if (!entries.length) return el("p", { class: "muted" }, "–");
    return el("dl", { class: "kv" }, entries.map(([k, v]) => [el("dt", {}, k),
      el("dd", { class: "mono" }, v instanceof Node ? v : v === null ? "–" : typeof v === "object" ? JSON.stringify(v) : String(v))]));
  }

  const PLAN_LABELS = {
    model_load_gib: ["model weights", gibs], drafter_loaded: ["drafter loaded", (v) => (v === null ? "–" : v ? "yes" : "no")],
    cuda_graph_estimate_gib: ["CUDA graph estimate", gibs], kv_cache_gib: ["KV cache", gibs],
    kv_cache_tokens: ["KV cache tokens", (v) => (v === null ? "–" : Number(v).toLocaleString("en"))],
    max_concurrency: ["max concurrency", (v) => (v === null ? "–" : `${num(v, 2)}×`)],
  };

  function startupPlan(plan) {
    const out = {};
    for (const [k, v] of Object.entries(plan || {})) {
      if (window.FW.served.KEYS.includes(k)) continue;  // the serving configuration beside it
      const [label, fmt] = PLAN_LABELS[k] || [k, (x) => x];
      out[label] = v === null || v === undefined ? "–" : fmt(v);
    }
    return kvTable(out);
  }

  function eventsText(counts) {
    const entries = Object.entries(counts || {});
    if (!entries.length) return el("span", { class: "muted" }, "none");
    return el("span", {}, entries.map(([k, n]) => el("span", { class: "tag kind", style: { borderColor: colorFor(KIND_COLORS, k) } }, `${k} ×${n}`)));
  }

  function workloadRows(p) {
    return listOf(p.workloads).map((w) => {
      const t = (p.telemetry || {})[w.name] || {};
      const command = w.kind === "command";
      return el("tr", { dataset: { workload: w.name } },
        el("td", {}, w.name, el("div", { class: "muted" }, w.kind || "")), el("td", {}, w.outcome || "–"),
        el("td", { class: "num" }, command ? "–" : w.requests ?? "–"), el("td", { class: "num" }, command ? (w.exit_status ?? "killed") : w.errors ?? "–"),
        el("td", { class: "num" }, command ? "–" : w.malformed_tool_calls ?? "–"),
        el("td", { class: "num" }, command ? "–" : secs(w.latency_median_s)), el("td", { class: "num" }, command ? "–" : secs(w.latency_p95_s)),
        el("td", { class: "num" }, command ? secs(w.duration_s) : secs(w.latency_max_s)),
        el("td", { class: "num hide-narrow" }, command ? "–" : (w.max_prompt_tokens ?? "–")),
        el("td", { class: "num" }, gibs(t.min_mem_available_gib)), el("td", { class: "num" }, gibs(t.max_used_gib)),
        el("td", { class: "num" }, gibs(t.max_swap_gib)), el("td", { class: "num" }, num(t.max_psi_full_avg10, 2)),
        el("td", { class: "num hide-narrow" }, t.samples ?? "–"),
        el("td", {}, eventsText((p.kernel_events || {})[w.name])),
        el("td", { class: "mono hide-narrow" }, `${clock(w.started_at, false)}–${clock(w.ended_at, false)}`));
    });
  }

  const WORKLOAD_HEAD = ["Workload", "Outcome", "Requests", "Errors", "Malformed tool calls", "Median", "p95", "Max",
    "Max prompt tokens", "Min MemAvailable", "Max used", "Max swap", "Max PSI full", "Samples", "Kernel events", "Window"];
  const NARROW = new Set(["Max prompt tokens", "Samples", "Window"]);

  function profileSection(p) {
    const s = p.startup || {};
    return el("section", { class: "profile", dataset: { profile: p.label || p.profile, verdict: p.verdict || "" } },
      el("h2", { class: "profile-title" }, `Profile ${p.label || p.profile} `, verdictTag(p.verdict), p.description ? el("span", { class: "muted" }, ` ${p.description}`) : null),
      (p.reasons || []).length ? el("ul", { class: "reasons error" }, p.reasons.map((r) => el("li", {}, r))) : null,
      el("div", { class: "profile-grid" },
        el("div", {}, el("h3", {}, "Startup"), kvTable({
          outcome: s.outcome || "–", "time to healthy": secs(s.duration_s), started: clock(s.started_at, false),
          healthy: clock(s.healthy_at, false), error: s.error || undefined,
          "kernel events": eventsText((p.kernel_events || {}).startup),
        })),
        el("div", {}, el("h3", {}, "Startup memory plan"), startupPlan(p.startup_plan)),
        el("div", { class: "served-config" }, el("h3", {}, "Serving configuration (vLLM's log)"), kvTable(window.FW.served.fields(p)))),
      el("h3", {}, "Workloads and telemetry inside their windows"),
      el("div", { class: "table-wrap" }, el("table", { class: "workloads" },
        el("thead", {}, el("tr", {}, WORKLOAD_HEAD.map((h) => el("th", { class: NARROW.has(h) ? "hide-narrow" : null }, h)))),
        el("tbody", {}, workloadRows(p)))),
      el("details", {}, el("summary", { class: "muted" }, "Server command"), el("pre", { class: "argv" }, (p.argv || []).join(" "))));
  }

  function overview(profiles) {
    if (!profiles.length) return el("p", { class: "muted" }, "No profile has started yet.");
    return el("div", {}, el("div", { class: "table-wrap" }, el("table", { id: "overview" },
      el("thead", {}, el("tr", {}, ["Profile", "Verdict", "Startup", "KV cache", "Requests", "Median", "p95", "Min MemAvailable", "Reasons"].map((h) => el("th", {}, h)))),
      el("tbody", {}, profiles.map((p) => {
        const w = listOf(p.workloads), t = Object.values(p.telemetry || {});
        const mins = t.map((x) => x.min_mem_available_gib).filter((v) => v !== null && v !== undefined);
        const requests = w.reduce((a, x) => a + (x.requests || 0), 0);
        return el("tr", { dataset: { profile: p.label || p.profile } },
          el("td", {}, el("a", { href: `#profile-${p.label || p.profile}` }, p.label || p.profile)), el("td", {}, verdictTag(p.verdict)),
          el("td", {}, `${p.startup?.outcome || "–"} ${p.startup?.duration_s != null ? `(${secs(p.startup.duration_s)})` : ""}`),
          el("td", { class: "num" }, gibs(p.startup_plan?.kv_cache_gib)), el("td", { class: "num" }, w.length ? requests : "–"),
          el("td", { class: "num" }, secs(w[0]?.latency_median_s)), el("td", { class: "num" }, secs(w[0]?.latency_p95_s)),
          el("td", { class: "num" }, mins.length ? gibs(Math.min(...mins)) : "–"),
          el("td", { class: "error" }, (p.reasons || []).join("; ")));
      })))), window.FW.served.table(profiles));
  }

  // Latency distribution: per profile a box (p25–p75, median), whiskers (min–max), a p95 tick
  // and every request as a dot (failed ones red), on one shared linear axis. Plain SVG.
  const SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) node.setAttribute(k, v);
    for (const c of children.flat(Infinity)) if (c) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  }
  function niceTicks(max, count = 6) {
    const raw = max / count, mag = 10 ** Math.floor(Math.log10(raw));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
    const n = Math.max(1, Math.ceil(max / step - 1e-9));  // the last tick is at or above max
    return Array.from({ length: n + 1 }, (_, i) => Number((i * step).toPrecision(12)));
  }
  function latencyPlot(rows) {
    rows = rows.filter((r) => r.requests > 0);
    if (!rows.length) return el("p", { class: "muted" }, "No request latencies yet.");
    const W = 900, left = 90, right = 20, rowH = 40, top = 8, axisH = 30;
    const H = top + rows.length * rowH + axisH;
    const ticks = niceTicks(Math.max(...rows.map((r) => r.max)) || 1);
    const maxV = ticks[ticks.length - 1] || 1;
    const x = (v) => left + ((W - left - right) * v) / maxV;
    const g = rows.map((r, i) => {
      const cy = top + i * rowH + rowH / 2, bh = rowH * 0.5;
      const dots = [...r.ok_s.map((v) => [v, "ok"]), ...r.failed_s.map((v) => [v, "failed"])].map(([v, kind], j) =>
        svg("circle", { cx: x(v).toFixed(1), cy: (cy - bh / 2 + bh * ((j * 0.618034) % 1)).toFixed(1), r: 3, class: `dot ${kind}` }));
      const tip = `${r.label}: ${r.requests} requests (${r.failed} failed) · min ${secs(r.min)} · p25 ${secs(r.p25)} · median ${secs(r.median)} · p75 ${secs(r.p75)} · p95 ${secs(r.p95)} · max ${secs(r.max)}`;
      return svg("g", { class: "lat-row", "data-profile": r.label },
        svg("title", {}, tip),
        svg("text", { x: left - 8, y: cy + 4, "text-anchor": "end", class: "label" }, r.label),
        svg("line", { x1: x(r.min), x2: x(r.max), y1: cy, y2: cy, class: "whisker" }),
        svg("rect", { x: x(r.p25), y: cy - bh / 2, width: Math.max(1, x(r.p75) - x(r.p25)), height: bh, class: "box" }),
        dots,
        svg("line", { x1: x(r.median), x2: x(r.median), y1: cy - bh / 2, y2: cy + bh / 2, class: "median" }),
        svg("line", { x1: x(r.p95), x2: x(r.p95), y1: cy - bh / 2 - 3, y2: cy + bh / 2 + 3, class: "p95" }));
    });
    const axisY = top + rows.length * rowH + 4;
    const axis = svg("g", { class: "lat-axis" }, svg("line", { x1: left, x2: W - right, y1: axisY, y2: axisY }),
      ticks.map((t) => [svg("line", { x1: x(t), x2: x(t), y1: axisY, y2: axisY + 4 }),
        svg("text", { x: x(t), y: axisY + 16, "text-anchor": "middle" }, `${t} s`)]));
    return el("div", {}, svg("svg", { class: "latency-plot", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "request latency per profile" }, g, axis),
      el("p", { class: "muted legend-lat" }, "Box: p25–p75 with the median; whiskers: min–max; tall tick: p95; dots: every request (red: failed). Hover a row for figures."));
  }

  const kOfN = (c) => (c ? `${c.k}/${c.n}` : "–");
  const spreadText = (s) => (!s ? "–" : s.min === s.max ? num(s.median, 3) : `${num(s.median, 3)} [${num(s.min, 3)}–${num(s.max, 3)}]`);

  function eventText(e) {
    if (e.kind === "freeze") return `host froze during ${e.unit}: incident #${e.incident?.id} (${e.incident?.kind}); ${e.outcome === "ok" ? "the run went on" : `wait: ${e.outcome}`}`;
    if (e.kind === "power_cycle") return `power cycle after ${e.away_s} s away: ${(e.argv || []).join(" ")} → exit ${e.exit_status ?? "–"}`;
    if (e.kind === "resumed") return `taken over after a collector restart (${(e.interrupted_steps || []).length} step(s) interrupted)`;
    return e.kind;
  }

  // One row per profile: cold starts, freezes and kernel events k of N, figures median [min–max].
  function campaign(summary, events) {
    const rows = listOf(summary?.profiles), kinds = listOf(summary?.kernel_kinds), loads = listOf(summary?.workloads);
    const figures = [["startup_s", "Startup s"], ["kv_cache_gib", "KV cache GiB"], ["min_mem_available_gib", "Min MemAvailable GiB"],
      ...loads.flatMap((w) => [[`${w}.latency_median_s`, `${w} p50 s`], [`${w}.latency_p95_s`, `${w} p95 s`]])];
    const list = listOf(events).length ? el("ul", { class: "campaign-events" }, listOf(events).map((e) => el("li", { dataset: { event: e.kind } }, eventText(e)))) : null;
    const rate = (c, cls) => el("td", { class: `num ${cls}${c && c.k ? " error" : ""}`, dataset: { k: c?.k ?? "", n: c?.n ?? "" } }, kOfN(c));
    // Each freeze links to its incident.
    const freezesCell = (c) => {
      const cell = rate(c, "freezes");
      for (const id of listOf(c?.incidents)) cell.append(" ", el("a", { href: `/incidents/${id}` }, `#${id}`));
      return cell;
    };
    const table = el("div", { class: "table-wrap" }, el("table", { id: "campaign-table" },
      el("thead", {}, el("tr", {}, ["Profile", "Cold starts", "Freezes", ...kinds, ...figures.map((f) => f[1]), "Verdict FAIL"].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows.map((r) => el("tr", { dataset: { profile: r.profile } },
        el("td", {}, r.profile), el("td", { class: "num" }, `${r.n}${r.interrupted ? ` (+${r.interrupted} interrupted)` : ""}`),
        freezesCell(r.freezes),
        kinds.map((k) => rate(r.kernel_events?.[k], `kind-${k}`)),
        figures.map(([key]) => el("td", { class: "num" }, spreadText(r.figures?.[key]))),
        rate({ k: r.verdicts?.fail ?? 0, n: r.verdicts?.n ?? 0 }, "verdicts"))))));
    const note = el("p", { class: "muted" }, "k/N: in k of the profile's N cold starts. Figures: median [min–max] over the repetitions.");
    const compared = listOf(summary?.comparisons).flatMap((c) => [...Object.entries(c.rates || {}), ...Object.entries(c.medians || {})]
      .map(([what, x]) => el("li", {}, `${c.profile} vs ${c.baseline}, ${what}: ${x.words}`)))
      .concat(window.FW.served.comparisons(summary).map((line) => el("li", { class: "served-vs" }, line)));
    return el("div", {}, list, table, note, compared.length ? el("ul", { class: "comparisons" }, compared) : null);
  }

  function stepsTable(steps, run) {
    if (!steps.length) return el("p", { class: "muted", id: "steps-empty" }, window.FW.campaign.noSteps(run));
    return el("div", { class: "table-wrap" }, el("table", { id: "steps" },
      el("thead", {}, el("tr", {}, ["Profile", "Step", "Outcome", "Started", "Took", "Detail"].map((h) => el("th", {}, h)))),
      el("tbody", {}, steps.map((s) => el("tr", {},
        el("td", {}, s.repetition > 1 ? `${s.profile} #${s.repetition}` : s.profile), el("td", {}, `${s.kind}: ${s.name}`),
        el("td", { class: s.outcome && s.outcome !== "ok" ? "error" : null }, s.outcome || (s.ended_at ? "–" : "running")),
        el("td", { class: "mono" }, clock(s.started_at, false)), el("td", { class: "num" }, s.ended_at ? secs(s.ended_at - s.started_at) : "…"),
        el("td", { class: "mono detail" }, s.detail?.error || (s.detail?.exit_status !== undefined && s.kind !== "workload" ? `exit ${s.detail.exit_status ?? "–"}` : "")))))));
  }

  async function runPage() {
    const id = cfg.run;
    const cancelBtn = document.getElementById("run-cancel");
    cancelBtn.addEventListener("click", () => cancel(id).catch((e) => window.alert(e.message)));
    document.getElementById("copy-report").addEventListener("click", copyReport);
    let stop = null;
    stop = poll(async () => {
      let run;
      try { run = await api(`/api/v1/matrix-runs/${id}`); } catch (err) {
        // Gone: say so and stop; anything else is tried again on the next poll (said on a page
        // not drawn yet; a drawn one keeps what it shows).
        if (err.status === 404) { notice(document.getElementById("run-summary"), `No matrix run #${id}.`); if (stop) stop(); }
        else if (!document.body.dataset.runStatus) notice(document.getElementById("run-summary"), `${err.message}: trying again`);
        else console.warn(`matrix run ${id}:`, err.message);
        return;
      }
      const active = ACTIVE.has(run.status);
      document.getElementById("run-status").replaceChildren(statusTag(run.status));
      const banner = document.getElementById("run-error");
      banner.hidden = !run.error;
      banner.textContent = run.error ? `${run.status === "failed" ? "Failed" : run.status}: ${run.error}` : "";
      document.getElementById("run-progress").replaceChildren(progress(run));
      cancelBtn.hidden = !active || run.cancel_requested;
      document.getElementById("run-summary").replaceChildren(kvTable({
        name: run.name || "–", host: run.host ? el("a", { href: `/hosts/${encodeURIComponent(run.host)}` }, run.host) : "–",
        preset: run.preset || "(own spec)", created: clock(run.created_at), started: clock(run.started_at), ended: clock(run.ended_at),
        took: run.started_at ? duration((run.ended_at ?? Date.now() / 1000) - run.started_at) : "–",
        "cancel requested": run.cancel_requested ? "yes" : undefined, error: run.error || undefined,
      }));
      const profiles = listOf(run.report?.profiles);
      const many = listOf(run.report?.summary?.profiles).some((r) => r.repetitions > 1) || listOf(run.events).length > 0;
      document.getElementById("campaign").hidden = !many;
      if (many) document.getElementById("campaign-wrap").replaceChildren(campaign(run.report?.summary, run.events));
      document.getElementById("overview-wrap").replaceChildren(overview(profiles));
      document.getElementById("profiles").replaceChildren(...profiles.map((p) => {
        const section = profileSection(p); section.id = `profile-${p.label || p.profile}`; return section;
      }));
      document.getElementById("steps-wrap").replaceChildren(stepsTable(listOf(run.steps), run));
      if (!listOf(run.steps).length) document.getElementById("steps-details").open = true;  // say why it is empty
      await window.FW.campaign.incidents(run, document.getElementById("run-incidents-wrap")).catch((e) => console.warn(e.message));
      const [lat, md] = await Promise.allSettled([
        api(`/api/v1/matrix-runs/${id}/latencies`), api(`/api/v1/matrix-runs/${id}/report.md`, { text: true })]);
      if (lat.status === "fulfilled") document.getElementById("latency").replaceChildren(latencyPlot(listOf(lat.value.profiles)));
      if (md.status === "fulfilled") document.getElementById("report").textContent = md.value;
      document.body.dataset.runStatus = run.status;  // tests and scripts wait on this
      if (!active && stop) stop();
    }, 3000);
  }

  async function copyReport() {
    const text = document.getElementById("report").textContent, msg = document.getElementById("copy-msg");
    try { await navigator.clipboard.writeText(text); msg.textContent = "copied"; } catch (_) {
      const range = document.createRange(); range.selectNodeContents(document.getElementById("report"));
      const sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
      msg.textContent = "selected: press Ctrl+C";
    }
  }

  (cfg.page === "matrix-run" ? runPage() : listPage()).catch((err) => console.warn("matrix:", err.message));
})();
