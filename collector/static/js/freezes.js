/* Freeze timeline: every incident of every host in a time range on one axis, then a table,
   newest first, each with its cause (the first kernel event of its window).

   GET /api/v1/incidents?host=&kind=&since=&limit= → [Incident] (collector/incidents/read.py):
   {"id", "host", "simulated", "url", "kind", "state": open|resolving|resolved,
    "resolution" | null, "start" (last heartbeat), "end" | null (heartbeats back),
    "opened_at", "returned_at", "resolved_at", "downtime_s" | null, "stall_s", "cause" | null, ...};
   epoch seconds. A bar spans start → end (now while open): its upper part has the kind's
   colour, its lower stripe the resolution's (or open/resolving). The filters and the range live
   in the URL. */
(function () {
  "use strict";
  const { api, el, clock, clockTz, duration, now, listOf, poll, query, setQuery, label, outcome, hoverCard, INCIDENT_KIND_COLORS, RESOLUTION_COLORS, colorFor } = window.FW;
  // "fit": the last 30 days' incidents, the axis from the first of them.
  const RANGES = { fit: 30 * 86400, "24h": 86400, "7d": 7 * 86400, "30d": 30 * 86400, all: null };
  const fHost = document.getElementById("f-host"), fKind = document.getElementById("f-kind");
  const fResolution = document.getElementById("f-resolution"), fRange = document.getElementById("f-range");
  const lanes = document.getElementById("lanes"), axis = document.getElementById("axis");
  const tbody = document.querySelector("#incidents tbody"), summary = document.getElementById("summary");

  const downtime = (i) => i.downtime_s ?? ((i.end ?? now()) - i.start);
  const kindColor = (i) => colorFor(INCIDENT_KIND_COLORS, i.kind);
  const outcomeColor = (i) => colorFor(RESOLUTION_COLORS, outcome(i));
  const tag = (text, color) => el("span", { class: "tag kind", style: { borderLeftColor: color } }, label(text));
  const causeText = (c) => (c ? `${label(c.kind)}${c.xid != null ? ` ${c.xid}` : ""}${c.nv_err ? ` ${c.nv_err}` : ""}` : null);

  /** The kinds and outcomes of the incidents shown, nothing else. */
  function legend(incidents) {
    const item = (name, color) => el("span", { dataset: { legend: name } }, el("i", { style: { background: color } }), label(name));
    const kinds = [...new Set(incidents.map((i) => i.kind))], outcomes = [...new Set(incidents.map(outcome))];
    document.getElementById("incident-legend").replaceChildren(...(incidents.length ? [
      el("span", {}, "bar top, kind:"), ...kinds.map((k) => item(k, colorFor(INCIDENT_KIND_COLORS, k))),
      el("span", {}, "· bottom, resolution:"), ...outcomes.map((k) => item(k, colorFor(RESOLUTION_COLORS, k)))] : []));
  }

  function card(i) {
    const c = i.cause;
    return [
      el("div", {}, el("strong", {}, `#${i.id} ${i.host}`), " ", tag(i.kind, kindColor(i)), "→ ", tag(outcome(i), outcomeColor(i))),
      el("div", { class: "muted" }, `${clockTz(i.start)} · down ${duration(downtime(i))}${i.end ? "" : " so far"}`),
      el("div", {}, c ? [el("strong", {}, causeText(c)), c.meaning ? `: ${c.meaning}` : ""] : el("span", { class: "muted" }, "no kernel evidence")),
      c && c.text ? el("div", { class: "mono" }, c.text) : null,
    ];
  }

  async function loadHosts() {
    const hosts = listOf(await api("/api/v1/hosts"), "hosts");
    fHost.append(...hosts.map((h) => el("option", { value: h.name }, h.name)));
    fHost.value = query().get("host") || "";
  }

  function draw(incidents, since) {
    const t1 = now();
    const first = incidents.length ? Math.min(...incidents.map((i) => i.start)) : t1 - 86400;
    const t0 = since ?? first - Math.max(60, (t1 - first) * 0.05);
    const x = (ts) => `${(100 * (Math.max(ts, t0) - t0)) / Math.max(1, t1 - t0)}%`;
    const byHost = new Map();
    for (const i of incidents) { if (!byHost.has(i.host)) byHost.set(i.host, []); byHost.get(i.host).push(i); }
    lanes.replaceChildren(...(byHost.size ? [...byHost].map(([host, list]) => el("div", { class: "lane" },
      el("a", { href: `/hosts/${encodeURIComponent(host)}` }, host),
      el("div", { class: "track" }, list.map((i) => hoverCard(el("a", {
        class: "bar", href: i.url, dataset: { incident: i.id, kind: i.kind, resolution: outcome(i) }, "aria-label": `incident #${i.id}`,
        style: {
          left: x(i.start), width: `calc(${x(i.end ?? t1)} - ${x(i.start)})`,
          background: `linear-gradient(${kindColor(i)} 0 55%, ${outcomeColor(i)} 55% 100%)`,
        },
      }), () => card(i)))))) : [el("p", { class: "muted" }, "No incidents in this range.")]));
    axis.replaceChildren(...[0, 0.25, 0.5, 0.75, 1].map((f) => el("span", {}, clock(t0 + f * (t1 - t0)))));
    tbody.replaceChildren(...(incidents.length ? incidents.map((i) => el("tr", { dataset: { incident: i.id } },
      el("td", {}, el("a", { href: i.url }, `#${i.id}`)),
      el("td", {}, el("a", { href: `/hosts/${encodeURIComponent(i.host)}` }, i.host), i.simulated ? [" ", el("span", { class: "tag" }, "simulated")] : null),
      el("td", {}, tag(i.kind, kindColor(i))),
      el("td", {}, i.resolution ? tag(i.resolution, outcomeColor(i)) : el("strong", { class: "error" }, i.state || "open"),
        i.stall_s ? ` (${duration(i.stall_s)} stall)` : null),
      el("td", { class: "cause" }, i.cause ? hoverCard(el("a", { href: i.cause.line_id ? `${i.url}#line-${i.cause.line_id}` : i.url, class: "cause-link" }, causeText(i.cause)), () => card(i))
        : el("span", { class: "muted" }, "no kernel evidence")),
      el("td", { class: "nowrap" }, clock(i.start)), el("td", { class: "hide-narrow nowrap" }, clock(i.end)),
      el("td", { class: "num" }, duration(downtime(i)))))
      : [el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No incidents in this range."))]));
    const open = incidents.filter((i) => i.state !== "resolved").length;
    summary.textContent = `${incidents.length} incident${incidents.length === 1 ? "" : "s"}${open ? `, ${open} open` : ""}, ${duration(incidents.reduce((s, i) => s + downtime(i), 0))} down in total`;
    legend(incidents);
  }

  let asked = 0;
  async function load() {
    const span = RANGES[fRange.value], seq = ++asked;
    const since = span ? now() - span : null;
    const data = await api("/api/v1/incidents", { params: { host: fHost.value, kind: fKind.value, since: since && since.toFixed(0), limit: 500 } });
    if (seq !== asked) return;  // the filters changed meanwhile: a newer answer is coming
    let incidents = listOf(data, "incidents");
    if (fResolution.value) incidents = incidents.filter((i) => outcome(i) === fResolution.value);
    draw(incidents.sort((a, b) => b.start - a.start), fRange.value === "fit" ? null : since);
  }

  for (const k of Object.keys(INCIDENT_KIND_COLORS)) fKind.append(el("option", { value: k }, label(k)));
  for (const k of Object.keys(RESOLUTION_COLORS)) fResolution.append(el("option", { value: k }, label(k)));
  const q = query();
  fKind.value = q.get("kind") || ""; fResolution.value = q.get("resolution") || "";
  fRange.value = q.get("range") in RANGES ? q.get("range") : "fit";
  for (const f of [fHost, fKind, fResolution, fRange]) {
    f.addEventListener("change", () => {
      setQuery({ host: fHost.value, kind: fKind.value, resolution: fResolution.value, range: fRange.value === "fit" ? null : fRange.value });
      load();
    });
  }
  loadHosts().catch((e) => console.warn(e.message)).finally(() => poll(load, 10000));
})();
