/* Log lines as the host and incident pages show them: which lines are noise (vLLM's access log
   below 5xx and the agent's canary lines; collector.readback.noise.noise matches the same on
   the server), which are kernel lines and errors, one row builder and one filter toolbar.
   Needs fw.js. */
(function () {
  "use strict";
  const { el, clock } = window.FW;
  // vLLM's access log: polled endpoints whatever they answer, anything else below 5xx.
  const ACCESS_LOG = /"[A-Z]+ \S+ HTTP\/[\d.]+" [1-4]\d\d\b|"GET \/(health|metrics|v1\/models|ping) HTTP\/[\d.]+" \d{3}\b/;
  const CANARY = /freezewatch canary /;
  const KERNEL_SOURCES = new Set(["kmsg", "netconsole"]);

  /** "access log", "canary" or null. */
  function noiseKind(l) {
    if (CANARY.test(l.text || "")) return "canary";
    if (!KERNEL_SOURCES.has(l.source) && ACCESS_LOG.test(l.text || "")) return "access log";
    return null;
  }
  const isKernel = (l) => KERNEL_SOURCES.has(l.source) || Boolean(l.fields && l.fields.pstore_file);
  const isError = (l) => l.priority !== null && l.priority !== undefined && l.priority <= 3 && !noiseKind(l);

  /** Does line l pass the toolbar's values {source, prio, q, noise}? source "kernel+errors":
      kernel lines and errors of any source, and the noise lines once they are asked for. */
  function passes(l, f) {
    const noise = noiseKind(l);
    if (!f.noise && noise) return false;
    if (f.source === "kernel+errors") { if (!isKernel(l) && !isError(l) && !noise) return false; }
    else if (f.source && l.source !== f.source) return false;
    if (f.prio !== "" && f.prio !== undefined && (l.priority === null || l.priority === undefined || l.priority > Number(f.prio))) return false;
    return !f.q || (l.text || "").toLowerCase().includes(f.q.toLowerCase());
  }

  function sourceText(l) {
    if (l.fields && l.fields.pstore_file) return `pstore ${l.fields.pstore_file}`;
    return l.fields && l.fields.via ? `${l.source} (${l.fields.via})` : l.source;
  }

  /** One table row; tag: text of a tag after the source ("late"), title: its explanation. */
  function row(l, { tag, title } = {}) {
    const noise = noiseKind(l);
    const cls = [noise ? "noise" : isError(l) ? "prio-hi" : null, isKernel(l) ? "kernel" : null].filter(Boolean).join(" ");
    return el("tr", { id: l.id ? `line-${l.id}` : null, class: cls || null, dataset: { ts: l.ts, lineId: l.id ?? "", noise: noise || "" } },
      el("td", { class: "mono nowrap" }, clock(l.ts)),
      el("td", {}, sourceText(l), tag ? [" ", el("span", { class: "tag", title }, tag)] : null),
      el("td", {}, l.priority ?? ""),
      el("td", { class: "mono text" }, l.text));
  }

  /** A row saying how many lines the filters hide, with a button that shows them. */
  function hiddenRow(cols, text, onShow) {
    return el("tr", { class: "hidden-count" }, el("td", { colspan: cols, class: "muted" }, text, " ",
      onShow ? el("button", { type: "button", class: "link", onclick: onShow }, "show") : null));
  }

  /** The filter toolbar inside root (#f-source, #f-priority, #f-text, #f-noise): values(),
      set(values) and onChange(fn) (text typing debounced). */
  function toolbar(root) {
    const source = root.querySelector("#f-source"), prio = root.querySelector("#f-priority");
    const text = root.querySelector("#f-text"), noise = root.querySelector("#f-noise");
    const listeners = [];
    let timer = null;
    const fire = () => listeners.forEach((fn) => fn());
    source.addEventListener("change", fire);
    prio.addEventListener("change", fire);
    if (noise) noise.addEventListener("change", fire);
    text.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(fire, 300); });
    return {
      values: () => ({ source: source.value, prio: prio.value, q: text.value.trim(), noise: noise ? noise.checked : true }),
      set(v) {
        if (v.source !== undefined) source.value = v.source;
        if (v.prio !== undefined) prio.value = v.prio;
        if (v.q !== undefined) text.value = v.q;
        if (noise && v.noise !== undefined) noise.checked = Boolean(v.noise);
      },
      onChange: (fn) => listeners.push(fn),
    };
  }

  /** Scroll the row of line id into view and flash it; false when it is not on the page. */
  function focusRow(id) {
    const tr = document.getElementById(`line-${id}`);
    if (!tr) return false;
    tr.scrollIntoView({ block: "center" });
    tr.classList.remove("flash");
    void tr.offsetWidth;  // restart the animation
    tr.classList.add("flash");
    return true;
  }

  window.FW.logs = { noiseKind, isKernel, isError, passes, row, hiddenRow, toolbar, focusRow };
})();
