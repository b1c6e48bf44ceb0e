/* One incident: the last 120 s as charts and lines, probes, resolution, artifacts, deliveries.

   Expects GET /api/v1/incidents/{id} →
   {"id", "host", "kind", "resolution" | null, "opened_at", "closed_at" | null,
    "last_heartbeat_at", "downtime_s"?, "boot_id_before"?, "boot_id_after"?,
    "snapshot": {"samples": [sample dicts as /samples returns], "lines": [line dicts],
                 "markers"?: [timeline markers], "vllm_phase"?: str,
                 "matrix"?: {"run_id", "profile"}},
    "kernel_alive": {"last_netconsole_at", "seconds_after_last_heartbeat"} | null,
    "late_evidence": [line dicts of the incident's boot received after it opened],
    "probes": [{"at", "probe", "ok", "detail"}],
    "artifacts": [{"id", "name", "size", "collected_at", "url"}]   (url serves it inline;
                  url + "?download=1" as an attachment),
    "deliveries": [{"at", "target", "event", "status", "attempts", "error"}]}
   Without a snapshot the charts fall back to the host timeline API for the 120 s window. */
(function () {
  "use strict";
  const { api, el, clock, duration, now, pageConfig, notice, listOf } = window.FW;
  const cfg = pageConfig();

  function table(id, rows, cols, empty) {
    const tbody = document.querySelector(`#${id} tbody`);
    tbody.replaceChildren(...(rows.length ? rows.map((r) => el("tr", {}, cols.map((c) => c(r))))
      : [el("tr", {}, el("td", { colspan: cols.length, class: "muted" }, empty))]));
  }
  const td = (v, cls) => el("td", { class: cls }, v ?? "–");
  const size = (b) => (b == null ? "–" : b < 1024 ? `${b} B` : b < 2 ** 20 ? `${(b / 1024).toFixed(1)} KiB` : `${(b / 2 ** 20).toFixed(1)} MiB`);

  async function load() {
    let inc;
    try {
      inc = await api(`/api/v1/incidents/${cfg.incident}`);
    } catch (err) {
      notice(document.getElementById("inc-summary"), err.status === 404 ? "No such incident (or incidents are not recorded by this collector yet)." : err.message);
      return;
    }
    document.getElementById("inc-kind").textContent = `${inc.kind} → ${inc.resolution || "open"}`;
    const end = inc.last_heartbeat_at ?? inc.opened_at;
    const down = inc.downtime_s ?? ((inc.closed_at ?? now()) - inc.opened_at);
    const snap = inc.snapshot || {};
    const facts = [
      ["Host", el("a", { href: `/hosts/${encodeURIComponent(inc.host)}` }, inc.host)],
      ["Kind", inc.kind], ["Resolution", inc.resolution || "open"],
      ["Last heartbeat", clock(inc.last_heartbeat_at)], ["Opened", clock(inc.opened_at)],
      ["Closed", clock(inc.closed_at)], ["Downtime", duration(down)],
      ["vLLM phase", snap.vllm_phase || "–"],
      ["Matrix run", snap.matrix ? el("a", { href: `/matrix/${snap.matrix.run_id}` }, `#${snap.matrix.run_id} ${snap.matrix.profile || ""}`) : "–"],
    ];
    if (inc.kernel_alive) facts.push(["Kernel alive", `last netconsole line ${Math.round(inc.kernel_alive.seconds_after_last_heartbeat)} s after the last heartbeat (${clock(inc.kernel_alive.last_netconsole_at)})`]);
    if (inc.boot_id_before) facts.push(["Boot", `${inc.boot_id_before} → ${inc.boot_id_after || "?"}`]);
    document.getElementById("inc-summary").replaceChildren(el("dl", { class: "kv" }, facts.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])));

    const since = end - 120, until = end + 5;
    const timeline = new window.FW.Timeline(document.getElementById("charts"), { height: 150 });
    window.FW.kindLegend(document.getElementById("kind-legend"));
    let lines = listOf(snap.lines, "lines");
    if (snap.samples) {
      const markers = snap.markers || lines.filter((l) => (l.source === "kmsg" || l.source === "netconsole") && (l.priority <= 3 || /NVRM|Xid/.test(l.text)))
        .map((l) => ({ ts: l.ts, kind: /Xid/.test(l.text) ? "xid" : /NV_ERR_/.test(l.text) ? "nv_err" : /NVRM/.test(l.text) ? "nvrm" : "kernel_err", text: l.text, source: l.source }));
      timeline.setData({ series: window.FW.seriesFromSamples(snap.samples), markers, incidents: [{ id: inc.id, start: end, end: inc.closed_at, kind: inc.kind }] }, { since, until });
    } else {
      const path = `/api/v1/hosts/${encodeURIComponent(inc.host)}`;
      const data = await api(`${path}/timeline`, { params: { since, until, step: 1 } });
      timeline.setData(data, { since, until });
      if (!lines.length) lines = (await api(`${path}/lines`, { params: { since, until, limit: 1000 } })).lines || [];
    }
    table("inc-lines", lines, [(l) => td(clock(l.ts), "mono"), (l) => td(l.source), (l) => td(l.priority), (l) => td(l.text, "mono text")], "No lines in the last 120 s.");
    table("inc-late", listOf(inc.late_evidence, "late_evidence"), [(l) => td(clock(l.ts), "mono"), (l) => td(clock(l.received_at), "mono"), (l) => td(l.fields && l.fields.pstore_file ? `pstore ${l.fields.pstore_file}` : l.source), (l) => td(l.text, "mono text")], "Nothing of this boot arrived after the incident opened.");
    table("inc-probes", listOf(inc.probes, "probes"), [(p) => td(clock(p.at)), (p) => td(p.probe || p.kind), (p) => td(p.ok ? "ok" : "failed", p.ok ? "status-up" : "status-lost"), (p) => td(p.detail, "mono")], "No probes recorded.");
    table("inc-artifacts", listOf(inc.artifacts, "artifacts"), [(a) => td(a.name, "mono"), (a) => td(size(a.size), "num"), (a) => td(clock(a.collected_at)),
      (a) => el("td", {}, el("a", { href: a.url }, "view"), " · ", el("a", { href: `${a.url}${a.url.includes("?") ? "&" : "?"}download=1`, download: a.name }, "download"))], "No artifacts (collected after a reboot).");
    table("inc-deliveries", listOf(inc.deliveries, "deliveries"), [(d) => td(clock(d.at)), (d) => td(d.target, "mono"), (d) => td(d.event), (d) => td(d.status), (d) => td(d.attempts, "num"), (d) => td(d.error, "mono")], "No alert deliveries.");
  }

  load().catch((err) => console.warn("incident:", err.message));
})();
