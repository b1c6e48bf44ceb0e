/* Freeze timeline: every incident of every host on one time axis, then a table, newest first.

   GET /api/v1/incidents?host=&kind=&limit= → [Incident] (collector/services/incident_views.py):
   {"id", "host", "simulated", "url", "kind", "state": open|resolving|resolved,
    "resolution" | null, "start" (last heartbeat), "end" | null (heartbeats back),
    "opened_at", "returned_at", "resolved_at", "downtime_s" | null, "stall_s", ...};
   epoch seconds. A bar spans start → end (now while open): its upper part has the kind's
   colour, its lower stripe the resolution's (or open/resolving). */
(function () {
  "use strict";
  const { api, el, clock, duration, now, listOf, poll, INCIDENT_KIND_COLORS, RESOLUTION_COLORS, colorFor } = window.FW;
  const fHost = document.getElementById("f-host"), fKind = document.getElementById("f-kind");
  const fResolution = document.getElementById("f-resolution");
  const lanes = document.getElementById("lanes"), axis = document.getElementById("axis");
  const tbody = document.querySelector("#incidents tbody"), summary = document.getElementById("summary");

  const outcome = (i) => i.resolution || i.state || "open";
  const downtime = (i) => i.downtime_s ?? ((i.end ?? now()) - i.start);
  const kindColor = (i) => colorFor(INCIDENT_KIND_COLORS, i.kind);
  const outcomeColor = (i) => colorFor(RESOLUTION_COLORS, outcome(i));
  const tag = (text, color) => el("span", { class: "tag kind", style: { borderLeftColor: color } }, text.replace(/_/g, " "));

  function legend() {
    const item = (name, color) => el("span", {}, el("i", { style: { background: color } }), name.replace(/_/g, " "));
    document.getElementById("incident-legend").replaceChildren(
      el("span", {}, "kind:"), ...Object.entries(INCIDENT_KIND_COLORS).map(([k, c]) => item(k, c)),
      el("span", {}, "· resolution:"), ...Object.entries(RESOLUTION_COLORS).map(([k, c]) => item(k, c)));
  }

  async function loadHosts() {
    const hosts = listOf(await api("/api/v1/hosts"), "hosts");
    fHost.append(...hosts.map((h) => el("option", { value: h.name }, h.name)));
  }

  function draw(incidents) {
    const t1 = now();
    const t0 = incidents.length ? Math.min(...incidents.map((i) => i.start)) - 60 : t1 - 86400;
    const x = (ts) => `${(100 * (ts - t0)) / Math.max(1, t1 - t0)}%`;
    const byHost = new Map();
    for (const i of incidents) { if (!byHost.has(i.host)) byHost.set(i.host, []); byHost.get(i.host).push(i); }
    lanes.replaceChildren(...(byHost.size ? [...byHost].map(([host, list]) => el("div", { class: "lane" },
      el("a", { href: `/hosts/${encodeURIComponent(host)}` }, host),
      el("div", { class: "track" }, list.map((i) => el("a", {
        class: "bar", href: i.url, dataset: { incident: i.id, kind: i.kind, resolution: outcome(i) },
        title: `#${i.id} ${i.kind} → ${outcome(i)} · ${clock(i.start)} · down ${duration(downtime(i))}`,
        style: {
          left: x(i.start), width: `calc(${x(i.end ?? t1)} - ${x(i.start)})`,
          background: `linear-gradient(${kindColor(i)} 0 55%, ${outcomeColor(i)} 55% 100%)`,
        },
      }))))) : [el("p", { class: "muted" }, "No incidents in view.")]));
    axis.replaceChildren(...[0, 0.25, 0.5, 0.75, 1].map((f) => el("span", {}, clock(t0 + f * (t1 - t0)))));
    tbody.replaceChildren(...incidents.map((i) => el("tr", { dataset: { incident: i.id } },
      el("td", {}, el("a", { href: i.url }, `#${i.id}`)),
      el("td", {}, el("a", { href: `/hosts/${encodeURIComponent(i.host)}` }, i.host), i.simulated ? [" ", el("span", { class: "tag" }, "simulated")] : null),
      el("td", {}, tag(i.kind, kindColor(i))),
      el("td", {}, i.resolution ? tag(i.resolution, outcomeColor(i)) : el("strong", { class: "error" }, i.state || "open"),
        i.stall_s ? ` (${duration(i.stall_s)} stall)` : null),
      el("td", {}, clock(i.start)), el("td", { class: "hide-narrow" }, clock(i.end)),
      el("td", { class: "num" }, duration(downtime(i))))));
    const open = incidents.filter((i) => i.state !== "resolved").length;
    summary.textContent = `${incidents.length} incident${incidents.length === 1 ? "" : "s"}${open ? `, ${open} open` : ""}, ${duration(incidents.reduce((s, i) => s + downtime(i), 0))} down in total`;
  }

  async function load() {
    const data = await api("/api/v1/incidents", { params: { host: fHost.value, kind: fKind.value, limit: 500 } });
    let incidents = listOf(data, "incidents");
    if (fResolution.value) incidents = incidents.filter((i) => outcome(i) === fResolution.value);
    draw(incidents.sort((a, b) => b.start - a.start));
  }

  for (const k of Object.keys(INCIDENT_KIND_COLORS)) fKind.append(el("option", { value: k }, k.replace(/_/g, " ")));
  for (const k of Object.keys(RESOLUTION_COLORS)) fResolution.append(el("option", { value: k }, k.replace(/_/g, " ")));
  for (const f of [fHost, fKind, fResolution]) f.addEventListener("change", load);
  legend();
  loadHosts().catch((e) => console.warn(e.message));
  poll(load, 10000);
})();
