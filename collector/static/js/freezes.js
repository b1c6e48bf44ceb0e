/* Freeze timeline: every incident of every host on one time axis, then a table.

   Expects GET /api/v1/incidents?host=&kind=&limit= → {"incidents": [Incident]} (a bare list
   works too), Incident = {"id", "host", "kind", "resolution" | null, "opened_at",
   "closed_at" | null, "downtime_s" | null, "simulated"?}; times are epoch seconds. */
(function () {
  "use strict";
  const { api, el, clock, duration, now, listOf, poll, INCIDENT_COLORS, colorFor } = window.FW;
  const fHost = document.getElementById("f-host"), fKind = document.getElementById("f-kind");
  const lanes = document.getElementById("lanes"), axis = document.getElementById("axis");
  const tbody = document.querySelector("#incidents tbody"), summary = document.getElementById("summary");

  const downtime = (i) => i.downtime_s ?? ((i.closed_at ?? now()) - i.opened_at);
  const color = (i) => colorFor(INCIDENT_COLORS, i.resolution || (i.closed_at ? i.kind : "open"));

  async function loadHosts() {
    const hosts = listOf(await api("/api/v1/hosts"), "hosts");
    fHost.append(...hosts.map((h) => el("option", { value: h.name }, h.name)));
  }

  function draw(incidents) {
    const t1 = now();
    const t0 = incidents.length ? Math.min(...incidents.map((i) => i.opened_at)) - 60 : t1 - 86400;
    const x = (ts) => `${(100 * (ts - t0)) / Math.max(1, t1 - t0)}%`;
    const byHost = new Map();
    for (const i of incidents) { if (!byHost.has(i.host)) byHost.set(i.host, []); byHost.get(i.host).push(i); }
    lanes.replaceChildren(...(byHost.size ? [...byHost].map(([host, list]) => el("div", { class: "lane" },
      el("a", { href: `/hosts/${encodeURIComponent(host)}` }, host),
      el("div", { class: "track" }, list.map((i) => el("a", {
        class: "bar", href: `/incidents/${i.id}`, dataset: { incident: i.id },
        title: `#${i.id} ${i.kind} → ${i.resolution || "open"} · ${clock(i.opened_at)} · down ${duration(downtime(i))}`,
        style: { left: x(i.opened_at), width: `calc(${x(i.closed_at ?? t1)} - ${x(i.opened_at)})`, background: color(i) },
      }))))) : [el("p", { class: "muted" }, "No incidents in view.")]));
    axis.replaceChildren(...[0, 0.25, 0.5, 0.75, 1].map((f) => el("span", {}, clock(t0 + f * (t1 - t0)))));
    tbody.replaceChildren(...incidents.map((i) => el("tr", { dataset: { incident: i.id } },
      el("td", {}, el("a", { href: `/incidents/${i.id}` }, `#${i.id}`)),
      el("td", {}, i.host, i.simulated ? [" ", el("span", { class: "tag" }, "simulated")] : null),
      el("td", {}, el("span", { class: "tag", style: { borderColor: color(i) } }, i.kind)),
      el("td", {}, i.resolution || el("strong", { class: "error" }, "open")),
      el("td", {}, clock(i.opened_at)), el("td", { class: "hide-narrow" }, clock(i.closed_at)),
      el("td", { class: "num" }, duration(downtime(i))))));
    summary.textContent = `${incidents.length} incidents, ${duration(incidents.reduce((s, i) => s + downtime(i), 0))} down in total`;
  }

  async function load() {
    const data = await api("/api/v1/incidents", { params: { host: fHost.value, kind: fKind.value, limit: 500 } });
    let incidents = listOf(data, "incidents");
    // Filter here too, so an API without the filters still gives the right view.
    if (fHost.value) incidents = incidents.filter((i) => i.host === fHost.value);
    if (fKind.value) incidents = incidents.filter((i) => i.kind === fKind.value || i.resolution === fKind.value);
    draw(incidents.sort((a, b) => b.opened_at - a.opened_at));
  }

  fHost.addEventListener("change", load);
  fKind.addEventListener("change", load);
  for (const k of ["rebooted", "stall", "network_partition"]) fKind.append(el("option", {}, k));
  loadHosts().catch((e) => console.warn(e.message));
  poll(load, 10000);
})();
