/* What a matrix run page adds around the runner's report (matrix.js draws the report, the
   failure notice and the k-of-N campaign table): why its steps table is empty, and the host's
   incidents inside the run. Needs fw.js. */
(function () {
  "use strict";
  const { api, el, clock, duration, listOf, label, outcome, colorFor, RESOLUTION_COLORS } = window.FW;
  const ENDED_BADLY = new Set(["failed", "interrupted", "cancelled"]);

  /** What an empty steps table means for this run. */
  function noSteps(run) {
    if (run.status === "queued") return "No steps yet: the run is queued behind another run on this host.";
    if (run.status === "running") return "No steps yet: the run is connecting to the host.";
    if (ENDED_BADLY.has(run.status)) return `No steps: the run ${run.status} before its first step${run.error ? ` (${run.error})` : ""}.`;
    return "No steps recorded.";
  }

  /** The host's incidents that began while the run ran. */
  async function incidents(run, target) {
    if (!run.host || !run.started_at) { target.replaceChildren(el("p", { class: "muted" }, "The run never started: no window to look in.")); return; }
    const until = run.ended_at ?? Date.now() / 1000;
    const found = listOf(await api("/api/v1/incidents", { params: { host: run.host, since: run.started_at.toFixed(0), until: until.toFixed(0) } }), "incidents");
    target.replaceChildren(found.length ? el("ul", { id: "run-incidents" }, found.map((i) => el("li", { dataset: { incident: i.id } },
      el("a", { href: i.url }, `#${i.id}`), " ", el("span", { class: "tag kind", style: { borderLeftColor: colorFor(RESOLUTION_COLORS, outcome(i)) } }, `${label(i.kind)} → ${label(outcome(i))}`),
      ` ${clock(i.start)} · down ${duration(i.downtime_s ?? (i.end ?? Date.now() / 1000) - i.start)}`,
      i.cause ? ` · ${label(i.cause.kind)}` : ""))) : el("p", { class: "muted" }, `No incidents on ${run.host} while the run ran.`));
  }

  window.FW.campaign = { noSteps, incidents };
})();
