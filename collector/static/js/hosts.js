/* Hosts as a status board: polls GET /api/v1/hosts (each host's "board": covered buckets of the
   last hour, day and week, its incidents, freeze counts, a MemAvailable sparkline; shapes in
   collector/readback/board.py) and redraws without a page reload: the page's filters (name,
   status, label) and slice of the hosts, as the server rendered it. */
(function () {
  "use strict";
  const { api, el, ago, clock, duration, gib, num, pct, now, poll, listOf, label, outcome, hoverCard } = window.FW;
  const tbody = document.querySelector("#hosts tbody");
  const wrap = document.querySelector("[data-page=hosts]");
  // The page the server rendered: its filters (the URL's) and its slice of the hosts.
  const query = new URLSearchParams(location.search);
  const filters = { name: query.get("name"), status: query.get("status"), label: query.get("label"),
    limit: wrap.dataset.limit, offset: wrap.dataset.offset };
  const filtered = Boolean(filters.name || filters.status || filters.label);
  const refreshed = document.getElementById("refreshed");
  const RANGE_KEY = "fw-board-range";
  const SILENT = new Set(["planned", "paused"]);
  const RECENT_S = 86400;
  // The reader's choice, else fitted: the last hour while no host has more than an hour of data.
  const chosen = () => (["1h", "24h", "7d"].includes(localStorage.getItem(RANGE_KEY)) ? localStorage.getItem(RANGE_KEY) : null);
  const fitted = (list) => (list.some((h) => ((h.board && h.board.ranges["24h"].covered) || "").slice(0, -5).includes("1")) ? "24h" : "1h");
  let range = chosen() || "24h";
  let hosts = [];

  for (const b of document.querySelectorAll("#board-ranges button")) {
    b.addEventListener("click", () => { range = b.dataset.range; localStorage.setItem(RANGE_KEY, range); draw(); });
  }

  const cell = (title, attrs, ...children) => el("td", { ...attrs, dataset: { label: title } }, ...children);

  function vllmCell(h) {
    const l = h.latest || {};
    if (!l.vllm_health && h.vllm_phase == null) return el("span", { class: "muted" }, "not seen");
    const parts = [];
    if (h.vllm_phase) parts.push(label(h.vllm_phase));
    if (l.vllm_health) parts.push(`health ${l.vllm_health}`);
    if (l.vllm_running != null) parts.push(`${num(l.vllm_running, 0)} run / ${num(l.vllm_waiting, 0)} wait`);
    return parts.join(" · ");
  }

  function incidentCard(i) {
    return [el("div", {}, el("strong", {}, `#${i.id} `), `${label(i.kind)} → ${label(outcome(i))}`),
      el("div", { class: "muted" }, `${clock(i.start)} · down ${duration((i.end ?? now()) - i.start)}${i.end ? "" : " so far"}`),
      el("div", { class: "muted" }, "click to open")];
  }

  /** Uptime Kuma's strip: one segment a bucket (up, down, maintenance, no data), freezes marked. */
  function availability(h) {
    const b = h.board, r = b && b.ranges && b.ranges[range];
    if (!r) return el("span", { class: "muted" }, "–");
    const n = r.covered.length, end = r.since + n * r.step, t1 = Math.min(now(), end);
    const incidents = listOf(b.incidents, "incidents").filter((i) => i.start < end && (i.end ?? t1) >= r.since);
    const state = [...r.covered].map((c, k) => {
      const lo = r.since + k * r.step, hi = lo + r.step;
      const hit = incidents.filter((i) => i.start < hi && (i.end ?? t1) >= lo);
      if (hit.some((i) => !SILENT.has(i.kind))) return "down";
      if (hit.length) return "maint";
      return c === "1" ? "up" : "none";
    });
    const down = incidents.filter((i) => !SILENT.has(i.kind)).reduce((s, i) => s + Math.max(0, Math.min(i.end ?? t1, t1) - Math.max(i.start, r.since)), 0);
    const heard = state.filter((s) => s === "up" || s === "down").length * r.step;
    const x = (ts) => `${(100 * (ts - r.since)) / (end - r.since)}%`;
    const bar = el("div", { class: "avail", dataset: { range, buckets: n }, role: "img", "aria-label": `availability, last ${range}` },
      state.map((s) => el("i", { class: s })),
      incidents.filter((i) => !SILENT.has(i.kind) && i.start >= r.since).map((i) => hoverCard(el("a", {
        class: "freeze", href: i.url, dataset: { incident: i.id, resolution: outcome(i) }, style: { left: x(i.start) }, "aria-label": `incident #${i.id}`,
      }), () => incidentCard(i))));
    const uptime = heard ? `${(100 * Math.max(0, 1 - down / heard)).toFixed(down ? 2 : 0)} % up` : "no data";
    const freezes = b.freezes || {};
    return [bar, el("div", { class: "avail-meta" }, el("span", {}, `${uptime} · last ${range}`),
      el("span", { class: "freeze-count" }, `${freezes["24h"] ?? 0} freeze${freezes["24h"] === 1 ? "" : "s"} in 24 h · ${freezes["7d"] ?? 0} in 7 d`))];
  }

  /** The last hour's lowest MemAvailable per minute, its lowest point marked. */
  function sparkline(h) {
    const m = h.board && h.board.mem;
    const all = (m && m.available) || [];
    const first = all.findIndex((v) => v !== null);
    if (first < 0) return null;
    const values = all.slice(Math.min(first, all.length - 10));  // fitted to a new host's minutes
    const W = 120, H = 28, top = m.total || Math.max(...values.filter((v) => v !== null));
    const xy = (v, k) => [(k * W) / Math.max(1, values.length - 1), H - 2 - ((H - 4) * v) / top];
    let d = "", pen = false, low = null;
    values.forEach((v, k) => {
      if (v === null) { pen = false; return; }
      const [x, y] = xy(v, k);
      d += `${pen ? "L" : "M"}${x.toFixed(1)},${y.toFixed(1)}`;
      pen = true;
      if (low === null || v < low[0]) low = [v, x, y];
    });
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("class", "spark");
    svg.setAttribute("preserveAspectRatio", "none");
    svg.innerHTML = `<title>MemAvailable, last ${values.length} min (lowest per minute): down to ${gib(low[0])}</title><path d="${d}"/><circle class="low" cx="${low[1].toFixed(1)}" cy="${low[2].toFixed(1)}" r="2.2"/>`;
    return svg;
  }

  function statusCell(h) {
    const since = h.status_since ? ` for ${duration(now() - h.status_since)}` : "";
    const inc = h.open_incident, last = h.board && h.board.last_freeze;
    return [el("span", { class: `status status-${h.status}` }, h.status), el("span", { class: "muted" }, since),
      inc ? el("div", {}, el("a", { href: inc.url || `/incidents/${inc.id}`, dataset: { incident: inc.id }, class: "error" },
        `#${inc.id} ${label(inc.kind)}${inc.state === "resolving" ? " (resolving)" : ""}`, inc.since ? ` · ${duration(now() - inc.since)}` : "")) : null,
      last && (!inc || inc.id !== last.id) ? el("div", { class: "last-freeze" }, "last freeze ", ago(last.start), " ",
        el("a", { href: last.url, dataset: { incident: last.id } }, `(#${last.id} ${label(outcome(last))})`)) : null,
      !last && !inc ? el("div", { class: "last-freeze muted" }, "never froze") : null];
  }

  function row(h) {
    const l = h.latest || {}, last = h.board && h.board.last_freeze;
    const recent = last && now() - last.start < RECENT_S;
    const cls = h.open_incident ? "frozen" : recent ? "recent-freeze" : null;
    return el("tr", { class: cls, dataset: { host: h.name, recent: recent ? "1" : "" } },
      cell("Host", {}, el("a", { href: `/hosts/${encodeURIComponent(h.name)}` }, h.name), h.simulated ? [" ", el("span", { class: "tag" }, "simulated")] : null,
        Object.entries(h.labels || {}).map(([k, v]) => [" ", el("a", { class: "tag label", href: `/?label=${encodeURIComponent(`${k}=${v}`)}` }, `${k}=${v}`)]),
        h.agent && h.agent.outdated ? [" ", el("span", { class: "tag agent-outdated", title: `agent ${h.agent.version}, this collector bundles ${h.agent.bundled_version}: freezewatch-collector deploy-agent ${h.name}` }, "agent outdated")] : null,
        el("div", { class: "muted" }, `seen ${ago(h.last_seen)}`)),
      cell("Status", { class: "status-cell" }, statusCell(h)),
      cell("Availability", { class: "avail-cell" }, availability(h)),
      cell("MemAvailable", { class: "num" }, gib(l.mem_available), sparkline(h)),
      cell("PSI mem full", { class: "num" }, num(l.psi_mem_full_avg10, 2)),
      cell("GPU util", { class: "num hide-narrow" }, pct(l.gpu_util)),
      cell("vLLM", {}, vllmCell(h)),
    );
  }

  function draw() {
    for (const b of document.querySelectorAll("#board-ranges button")) b.classList.toggle("active", b.dataset.range === range);
    tbody.replaceChildren(...(hosts.length ? hosts.map(row)
      : [el("tr", {}, el("td", { colspan: 7, class: "muted" }, ...(filtered ? ["No host matches these filters."]
        : ["No hosts yet: ", el("code", {}, "freezewatch-collector add-host NAME"), "."])))]));
  }

  poll(async () => {
    hosts = listOf(await api("/api/v1/hosts", { params: filters }), "hosts");
    range = chosen() || fitted(hosts);
    draw();
    refreshed.textContent = `Updated ${clock(now(), false)}`;
  }, 5000);
})();
