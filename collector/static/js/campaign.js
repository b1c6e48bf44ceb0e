/* A matrix run as a campaign: why it failed (a banner), why its steps table is empty, each
   profile's k-of-N across its repetitions and the run's events (the report's "summary" and
   "events", once the runner writes them: nothing is drawn for fields a report lacks), and the
   host's incidents inside the run. Needs fw.js. */
(function () {
  "use strict";
  const { api, el, clock, duration, listOf, label, outcome, colorFor, RESOLUTION_COLORS } = window.FW;
  const ENDED_BADLY = new Set(["failed", "interrupted", "cancelled"]);

  /** The reason a run ended badly, as a banner (null when it did not). */
  function banner(run) {
    if (!ENDED_BADLY.has(run.status)) return null;
    const why = run.error || (run.report && run.report.error) || (run.status === "cancelled" ? "cancelled on request" : "no reason recorded");
    return el("div", { class: "banner", id: "run-banner", role: "alert" }, el("strong", {}, `Run ${run.status}: `), why);
  }

  /** What an empty steps table means for this run. */
  function noSteps(run) {
    if (run.status === "queued") return "No steps yet: the run is queued behind another run on this host.";
    if (run.status === "running") return "No steps yet: the run is connecting to the host.";
    if (ENDED_BADLY.has(run.status)) return `No steps: the run ${run.status} before its first step${run.error ? ` (${run.error})` : ""}.`;
    return "No steps recorded.";
  }

  const isCount = (v) => v && typeof v === "object" && typeof v.k === "number" && typeof v.n === "number";
  const kOfN = (c, bad = true) => el("span", { class: `kofn ${c.k && bad ? "error" : ""}`, dataset: { k: c.k, n: c.n } }, `${c.k}/${c.n}`);

  /** Per profile across repetitions: cold starts, freezes (with their incidents), FAIL verdicts,
      kernel-event kinds and any other k-of-N count the summary carries. */
  function summaryTable(summary) {
    const rows = listOf(summary && summary.profiles, "profiles");
    if (!rows.length) return null;
    const kinds = [...new Set(rows.flatMap((r) => Object.keys(r.kernel_events || {})))];
    const known = new Set(["freezes", "verdicts", "kernel_events"]);
    const extra = [...new Set(rows.flatMap((r) => Object.keys(r).filter((k) => !known.has(k) && isCount(r[k]))))];
    const head = ["Profile", "Cold starts", "Freezes", "FAIL", ...kinds.map(label), ...extra.map(label), "Lowest MemAvailable"];
    return el("div", { class: "table-wrap" }, el("table", { id: "campaign-summary" },
      el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
      el("tbody", {}, rows.map((r) => el("tr", { dataset: { profile: r.profile } },
        el("td", {}, r.profile), el("td", { class: "num" }, r.n ?? r.repetitions ?? "–"),
        el("td", {}, r.freezes ? [kOfN(r.freezes), " ", listOf(r.freezes.incidents, "incidents").map((id) => el("a", { href: `/incidents/${id}` }, ` #${id}`))] : "–"),
        el("td", {}, r.verdicts ? kOfN({ k: r.verdicts.fail, n: r.verdicts.n }) : "–"),
        kinds.map((k) => el("td", {}, r.kernel_events && r.kernel_events[k] ? kOfN(r.kernel_events[k]) : "–")),
        extra.map((k) => el("td", {}, kOfN(r[k], false))),
        el("td", { class: "num" }, r.headroom_min_gib != null ? `${Number(r.headroom_min_gib).toFixed(2)} GiB` : "–"))))));
  }

  function eventItem(e) {
    const inc = e.incident || (e.incident_id ? { id: e.incident_id } : null);
    const link = inc && inc.id ? el("a", { href: `/incidents/${inc.id}` }, `incident #${inc.id}`) : null;
    if (e.kind === "freeze") return el("li", {}, `host froze during ${e.unit || "the run"}: `, link, inc && inc.kind ? ` (${label(inc.kind)})` : "", e.outcome ? `, then ${label(e.outcome)}` : "");
    if (e.kind === "power_cycle") return el("li", {}, `power cycle after ${e.away_s ?? "?"} s away (`, link, `): exit status ${e.exit_status ?? "–"}`);
    if (e.kind === "resumed") return el("li", {}, "taken over after a collector restart");
    return el("li", {}, label(e.kind || "event"), link ? [" ", link] : null);
  }

  /** The campaign block of a run page, or null for a run whose report has none of it. */
  function section(run) {
    const report = run.report || {};
    const table = summaryTable(report.summary);
    const events = listOf(report.events, "events");
    if (!table && !events.length) return null;
    return el("div", { id: "campaign" }, table, events.length ? el("ul", { class: "campaign-events" }, events.map(eventItem)) : null);
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

  window.FW.campaign = { banner, noSteps, section, incidents };
})();
