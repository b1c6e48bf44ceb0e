/* Matrix runs list (/matrix) and one run (/matrix/{id}).

   Expects:
   GET  /api/v1/matrix-presets → {"presets": [{"name", "description"?}]}
   GET  /api/v1/matrix-runs → {"runs": [Run]};  POST /api/v1/matrix-runs {"preset", "host"} → Run
   GET  /api/v1/matrix-runs/{id} → Run with "profiles";  POST /api/v1/matrix-runs/{id}/cancel
   GET  /api/v1/matrix-runs/{id}/report.md → Markdown text
   Run = {"id", "name", "host", "status": queued|running|done|failed|cancelled,
          "progress": {"done", "total"}, "started_at", "finished_at" | null,
          "profiles": [{"name", "status", "verdict": pass|fail|null, "verdict_reasons": [str],
             "startup": {figure: value, ...},            (the startup plan, e.g. kv_cache_gib)
             "workloads": [{"name", "requests", "errors", "invalid_tool_calls", "p50_ms",
                            "p90_ms", "p99_ms", "max_ms", "start", "end"}],
             "telemetry": {"min_mem_available", "max_used", "max_swap", "max_psi_full_avg10",
                           "kernel_events": {kind: count}},
             "latency_ms": {"p50", "p90", "p99", "max"}}]} */
(function () {
  "use strict";
  const { api, el, clock, gib, num, listOf, poll, pageConfig, notice } = window.FW;
  const cfg = pageConfig();
  const ACTIVE = new Set(["queued", "running"]);

  function progress(run) {
    const p = run.progress || {};
    const frac = p.total ? Math.min(1, p.done / p.total) : run.status === "done" ? 1 : 0;
    return el("span", {}, el("span", { class: "progress", title: `${p.done ?? 0}/${p.total ?? "?"}` }, el("span", { style: { width: `${100 * frac}%` } })), ` ${p.done ?? 0}/${p.total ?? "?"}`);
  }

  async function cancel(id) {
    if (!window.confirm(`Cancel matrix run #${id}? Its remote processes are stopped.`)) return;
    await api(`/api/v1/matrix-runs/${id}/cancel`, { method: "POST" });
  }

  // /matrix
  async function listPage() {
    const form = document.getElementById("start-form"), msg = document.getElementById("start-msg");
    const [presets, hosts] = await Promise.all([api("/api/v1/matrix-presets"), api("/api/v1/hosts")]);
    const presetList = listOf(presets, "presets");
    document.getElementById("m-preset").replaceChildren(...presetList.map((p) => el("option", { value: p.name, title: p.description }, p.name)));
    document.getElementById("m-host").replaceChildren(...listOf(hosts, "hosts").map((h) => el("option", { value: h.name }, h.name)));
    if (!presetList.length) msg.textContent = "No presets configured yet.";
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const body = { preset: form.preset.value, host: form.host.value };
      try {
        const run = await api("/api/v1/matrix-runs", { method: "POST", body });
        location.href = `/matrix/${run.id}`;
      } catch (err) { msg.textContent = err.message; }
    });
    const tbody = document.querySelector("#runs tbody");
    poll(async () => {
      const runs = listOf(await api("/api/v1/matrix-runs"), "runs");
      tbody.replaceChildren(...(runs.length ? runs.map((r) => el("tr", { dataset: { run: r.id } },
        el("td", {}, el("a", { href: `/matrix/${r.id}` }, `#${r.id}`)), el("td", {}, r.name || "–"), el("td", {}, r.host || "–"),
        el("td", {}, r.status), el("td", {}, progress(r)), el("td", { class: "hide-narrow" }, clock(r.started_at)),
        el("td", { class: "hide-narrow" }, clock(r.finished_at)),
        el("td", {}, ACTIVE.has(r.status) ? el("button", { type: "button", onclick: () => cancel(r.id) }, "Cancel") : null)))
        : [el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No matrix runs yet."))]));
    }, 5000);
  }

  // /matrix/{id}
  function kvTable(obj) {
    const entries = Object.entries(obj || {});
    if (!entries.length) return el("p", { class: "muted" }, "–");
    return el("dl", { class: "kv" }, entries.map(([k, v]) => [el("dt", {}, k), el("dd", { class: "mono" }, typeof v === "object" && v !== null ? JSON.stringify(v) : String(v))]));
  }

  function profileSection(p) {
    const w = listOf(p.workloads, "workloads"), t = p.telemetry || {};
    const events = Object.entries(t.kernel_events || {}).map(([k, n]) => `${k} ×${n}`).join(", ") || "none";
    return el("section", { class: "profile", dataset: { profile: p.name } },
      el("h2", {}, `Profile ${p.name} `, el("span", { class: `tag ${p.verdict === "fail" ? "error" : ""}` }, p.verdict || p.status || "–")),
      (p.verdict_reasons || []).length ? el("p", { class: "error" }, p.verdict_reasons.join("; ")) : null,
      el("h3", {}, "Startup plan"), kvTable(p.startup),
      el("h3", {}, "Workloads"),
      el("div", { class: "table-wrap" }, el("table", {}, el("thead", {}, el("tr", {}, ["Workload", "Requests", "Errors", "Invalid tool calls", "p50 ms", "p90 ms", "p99 ms", "Window"].map((h) => el("th", {}, h)))),
        el("tbody", {}, w.map((x) => el("tr", {}, el("td", {}, x.name), el("td", { class: "num" }, x.requests ?? "–"), el("td", { class: "num" }, x.errors ?? "–"),
          el("td", { class: "num" }, x.invalid_tool_calls ?? "–"), el("td", { class: "num" }, num(x.p50_ms, 0)), el("td", { class: "num" }, num(x.p90_ms, 0)),
          el("td", { class: "num" }, num(x.p99_ms, 0)), el("td", { class: "mono" }, `${clock(x.start, false)}–${clock(x.end, false)}`)))))),
      el("h3", {}, "Telemetry inside the workload windows"),
      kvTable({ "min MemAvailable": gib(t.min_mem_available), "max used": gib(t.max_used), "max swap": gib(t.max_swap), "max PSI full avg10": num(t.max_psi_full_avg10, 2), "kernel events": events }));
  }

  function latencyChart(profiles) {
    const rows = profiles.filter((p) => p.latency_ms);
    if (!rows.length) return el("p", { class: "muted" }, "No latency figures yet.");
    const top = Math.max(...rows.map((p) => p.latency_ms.max ?? p.latency_ms.p99 ?? 0), 1);
    const colors = { max: "#a0aec0", p99: "#e53e3e", p90: "#dd6b20", p50: "#3182ce" };
    return el("div", {}, rows.map((p) => el("div", { class: "pct-row" }, el("span", { class: "mono" }, p.name),
      el("div", { class: "pct-track", title: Object.entries(p.latency_ms).map(([k, v]) => `${k} ${num(v, 0)} ms`).join(" · ") },
        ["max", "p99", "p90", "p50"].filter((k) => p.latency_ms[k] != null).map((k) => el("span", { style: { width: `${(100 * p.latency_ms[k]) / top}%`, background: colors[k] } }))))),
      el("p", { class: "muted" }, `p50 / p90 / p99 / max, scale 0–${num(top, 0)} ms`));
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
        notice(document.getElementById("run-summary"), err.status === 404 ? "No such matrix run (or matrix runs are not available on this collector yet)." : err.message);
        if (stop) stop();
        return;
      }
      document.getElementById("run-status").textContent = run.status;
      document.getElementById("run-progress").replaceChildren(progress(run));
      cancelBtn.hidden = !ACTIVE.has(run.status);
      document.getElementById("run-summary").replaceChildren(kvTable({ name: run.name || "–", host: run.host || "–", started: clock(run.started_at), finished: clock(run.finished_at) }));
      const profiles = listOf(run.profiles, "profiles");
      document.getElementById("latency").replaceChildren(latencyChart(profiles));
      document.getElementById("profiles").replaceChildren(...profiles.map(profileSection));
      try { document.getElementById("report").textContent = await api(`/api/v1/matrix-runs/${id}/report.md`, { text: true }); } catch (_) { /* not ready */ }
      if (!ACTIVE.has(run.status) && stop) stop();
    }, 5000);
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
