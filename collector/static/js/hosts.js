/* Hosts overview: polls GET /api/v1/hosts and redraws the table without a page reload. */
(function () {
  "use strict";
  const { api, el, ago, duration, gib, num, pct, now, poll, listOf } = window.FW;
  const tbody = document.querySelector("#hosts tbody");
  const refreshed = document.getElementById("refreshed");

  function vllmCell(h) {
    const l = h.latest || {};
    if (!l.vllm_health && h.vllm_phase == null) return "–";
    const parts = [l.vllm_health || "?"];
    if (h.vllm_phase) parts.push(h.vllm_phase);
    if (l.vllm_running != null) parts.push(`${num(l.vllm_running, 0)} run / ${num(l.vllm_waiting, 0)} wait`);
    return parts.join(" · ");
  }

  function incidentCell(h) {
    const inc = h.open_incident;
    if (!inc) return "–";
    const state = inc.state === "resolving" ? " (resolving)" : "";
    return el("a", { href: inc.url || `/incidents/${inc.id}`, dataset: { incident: inc.id } },
      `#${inc.id} ${inc.kind || ""}${state}`, inc.since ? ` · ${duration(now() - inc.since)}` : "");
  }

  function row(h) {
    const l = h.latest || {};
    const since = h.status_since ? ` for ${duration(now() - h.status_since)}` : "";
    return el("tr", { dataset: { host: h.name } },
      el("td", {}, el("a", { href: `/hosts/${encodeURIComponent(h.name)}` }, h.name), h.simulated ? [" ", el("span", { class: "tag" }, "simulated")] : null,
        h.agent && h.agent.outdated ? [" ", el("span", { class: "tag agent-outdated", title: `agent ${h.agent.version}, this collector bundles ${h.agent.bundled_version}: freezewatch-collector deploy-agent ${h.name}` }, "agent outdated")] : null),
      el("td", { class: `status status-${h.status}` }, h.status, el("span", { class: "muted" }, since)),
      el("td", {}, ago(h.last_seen)),
      el("td", { class: "num" }, gib(l.mem_available)),
      el("td", { class: "num" }, num(l.psi_mem_full_avg10, 2)),
      el("td", { class: "num hide-narrow" }, pct(l.gpu_util)),
      el("td", {}, vllmCell(h)),
      el("td", {}, incidentCell(h)),
    );
  }

  poll(async () => {
    const hosts = listOf(await api("/api/v1/hosts"), "hosts");
    tbody.replaceChildren(...(hosts.length ? hosts.map(row)
      : [el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No hosts yet: ", el("code", {}, "freezewatch-collector add-host NAME"), "."))]));
    refreshed.textContent = `Updated ${new Date().toLocaleTimeString()}`;
  }, 3000);
})();
