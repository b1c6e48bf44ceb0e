/* An incident's post-mortem artifacts: one row each (command, exit, size, when), readable inline
   with line numbers, downloadable; an empty or failed one says why. Needs fw.js. */
(function () {
  "use strict";
  const { api, el, clock, listOf } = window.FW;
  const MAX_SHOWN_LINES = 20000;
  const open = new Set(), texts = new Map();
  const size = (b) => (b == null ? "–" : b < 1024 ? `${b} B` : b < 2 ** 20 ? `${(b / 1024).toFixed(1)} KiB` : `${(b / 2 ** 20).toFixed(1)} MiB`);
  const secs = (s) => (s == null ? "–" : s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(2)} s`);
  const download = (a) => `${a.url}${a.url.includes("?") ? "&" : "?"}download=1`;

  /** Why an artifact has nothing to read, or null when it has. */
  function why(a) {
    if (a.name === "postmortem-error") {
      const ssh = /no SSH/i.test(a.error || "") ? " Give the host SSH settings (freezewatch-collector add-host NAME --ssh USER@ADDR --key PATH --trust-host-key) for the next freeze." : "";
      return `The post-mortem could not run: ${a.error || "unknown error"}.${ssh}`;
    }
    if (a.error) return `Failed: ${a.error}`;
    const tail = (a.stderr || "").trim().split("\n").slice(-3).join(" ");
    if (a.exit_status !== 0 && a.exit_status !== null && a.exit_status !== undefined) {
      return `The command exited ${a.exit_status}${tail ? `: ${tail}` : ""}${a.size ? "" : " and printed nothing"}.`;
    }
    if (!a.size) return `Empty: ${a.argv ? "the command" : "the file"} printed nothing${tail ? ` (stderr: ${tail})` : ""}${a.name.startsWith("pstore") ? "; a freeze without a panic leaves pstore empty" : ""}.`;
    return null;
  }

  function numbered(text) {
    const lines = text.replace(/\n$/, "").split("\n");
    const shown = lines.slice(0, MAX_SHOWN_LINES);
    return [
      el("pre", { class: "numbered" }, shown.map((line, i) => el("span", { class: "ln", dataset: { n: i + 1 } }, line, "\n"))),
      lines.length > shown.length ? el("p", { class: "muted" }, `${lines.length - shown.length} more lines: download the file to read them all.`) : null,
    ];
  }

  async function viewer(a, cell) {
    const key = `${a.name}:${a.size}`;
    if (!texts.has(key)) {
      cell.replaceChildren(el("p", { class: "muted" }, "Loading…"));
      try { texts.set(key, await api(a.url, { text: true })); } catch (err) { cell.replaceChildren(el("p", { class: "error" }, err.message)); return; }
    }
    cell.replaceChildren(...numbered(texts.get(key)));
  }

  function rows(a) {
    const reason = why(a), shown = open.has(a.name);
    const viewCell = el("td", { colspan: 7, class: "artifact-view" });
    const viewRow = el("tr", { class: "artifact-text", hidden: !shown, dataset: { artifact: a.name } }, viewCell);
    const toggle = (ev) => {
      ev.preventDefault();
      if (open.has(a.name)) { open.delete(a.name); viewRow.hidden = true; return; }
      open.add(a.name); viewRow.hidden = false; viewer(a, viewCell);
    };
    if (shown) viewer(a, viewCell);
    const actions = a.size ? [el("a", { href: a.url, class: "view", onclick: toggle }, shown ? "hide" : "view"), " · ", el("a", { href: download(a), download: "" }, "download")] : "–";
    const main = el("tr", { dataset: { artifact: a.name } },
      el("td", { class: "mono" }, a.name), el("td", { class: "mono text" }, a.argv ? a.argv.join(" ") : "–"),
      el("td", { class: a.exit_status === 0 ? "num status-up" : "num status-lost" }, a.error ? "error" : a.exit_status ?? "–"),
      el("td", { class: "num" }, `${size(a.size)}${a.truncated ? " (truncated)" : ""}`), el("td", { class: "num" }, secs(a.duration_s)),
      el("td", {}, clock(a.collected_at)), el("td", {}, actions));
    const out = [main];
    if (reason) out.push(el("tr", { class: "artifact-why", dataset: { artifact: a.name } }, el("td", { colspan: 7, class: a.error || a.name === "postmortem-error" || (a.exit_status ?? 0) !== 0 ? "error" : "muted" }, reason)));
    out.push(viewRow);
    return out;
  }

  function render(inc) {
    const pm = inc.postmortem || {}, list = listOf(inc.artifacts, "artifacts");
    const tbody = document.querySelector("#inc-artifacts tbody");
    const empty = pm.state === "none"
      ? inc.state === "resolved" ? "No post-mortem: artifacts are collected over SSH after a reboot, and this host did not reboot." : "Waiting for the host: artifacts are collected over SSH once it is back on a new boot."
      : pm.state === "pending" || pm.state === "running" ? "Collecting over SSH…" : "No artifacts.";
    tbody.replaceChildren(...(list.length ? list.flatMap(rows) : [el("tr", {}, el("td", { colspan: 7, class: "muted" }, empty))]));
  }

  window.FW.artifacts = { render, why };
})();
