/* freezewatch shared helpers: JSON fetch, formatting, DOM building, polling. No dependencies. */
(function () {
  "use strict";

  class HttpError extends Error {
    constructor(status, detail) { super(`HTTP ${status}: ${detail}`); this.status = status; }
  }

  /** GET/POST JSON with the login cookie; throws HttpError (401 sends the user to /login). */
  async function api(path, { method = "GET", body, params, text = false } = {}) {
    const url = new URL(path, location.origin);
    for (const [k, v] of Object.entries(params || {})) {
      if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, v);
    }
    const init = { method, headers: { Accept: text ? "text/plain, text/markdown" : "application/json" }, credentials: "same-origin" };
    if (body !== undefined) { init.body = JSON.stringify(body); init.headers["Content-Type"] = "application/json"; }
    const resp = await fetch(url, init);
    if (resp.status === 401) { location.href = `/login?next=${encodeURIComponent(location.pathname)}`; throw new HttpError(401, "login"); }
    if (!resp.ok) {
      let detail = resp.statusText;
      try {
        const d = (await resp.json()).detail || detail;
        // FastAPI's 422 lists each invalid field: show their messages.
        detail = Array.isArray(d) ? d.map((e) => e.msg || JSON.stringify(e)).join("; ") : d;
      } catch (_) { /* not JSON */ }
      throw new HttpError(resp.status, detail);
    }
    if (resp.status === 204) return null;
    return text ? resp.text() : resp.json();
  }

  /** el("td", {class: "num", dataset: {ts: 1}}, "text", childNode, ...) */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "dataset") Object.assign(node.dataset, v);
      else if (k === "style" && typeof v === "object") Object.assign(node.style, v);
      else if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  const pad = (n) => String(n).padStart(2, "0");
  function clock(ts, withDate = true) {
    if (ts === null || ts === undefined) return "–";
    const d = new Date(ts * 1000);
    const time = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
    return withDate ? `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time}` : time;
  }
  function duration(s) {
    if (s === null || s === undefined || Number.isNaN(s)) return "–";
    s = Math.max(0, s);
    if (s < 120) return `${Math.round(s)} s`;
    if (s < 7200) return `${Math.round(s / 60)} min`;
    if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
    return `${(s / 86400).toFixed(1)} d`;
  }
  const now = () => Date.now() / 1000;
  const ago = (ts) => (ts ? `${duration(now() - ts)} ago` : "never");
  const gib = (b) => (b === null || b === undefined ? "–" : `${(b / 2 ** 30).toFixed(1)} GiB`);
  const num = (v, d = 1) => (v === null || v === undefined ? "–" : Number(v).toFixed(d));
  const pct = (v, d = 0) => (v === null || v === undefined ? "–" : `${Number(v).toFixed(d)} %`);

  /** Accept either a bare list or {key: [...]} (APIs added by other branches may wrap lists). */
  function listOf(data, key) {
    if (Array.isArray(data)) return data;
    if (data && Array.isArray(data[key])) return data[key];
    if (data && Array.isArray(data.items)) return data.items;
    return [];
  }

  /** Call fn now and every intervalMs while the tab is visible; returns a stop function. */
  function poll(fn, intervalMs) {
    let timer = null, stopped = false;
    const tick = async () => {
      if (stopped) return;
      if (!document.hidden) { try { await fn(); } catch (err) { console.warn("poll:", err.message); } }
      if (!stopped) timer = setTimeout(tick, typeof intervalMs === "function" ? intervalMs() : intervalMs);
    };
    tick();
    return () => { stopped = true; clearTimeout(timer); };
  }

  /** Data attributes of the page's root element: server-side config without inline scripts. */
  function pageConfig() {
    const root = document.querySelector("[data-page]");
    return root ? { ...root.dataset, root } : {};
  }

  function notice(target, text, cls = "notice") {
    target.replaceChildren(el("p", { class: cls }, text));
  }

  // Colours per kernel-event kind, per incident kind/resolution and per vLLM phase (shared).
  const KIND_COLORS = {
    xid: "#e53e3e", nv_err: "#dd6b20", gsp: "#b83280", uvm: "#805ad5", bus_off: "#9b2c2c",
    soft_lockup: "#d69e2e", hung_task: "#b7791f", rcu_stall: "#975a16", oom_kill: "#c53030",
    alloc_failure: "#ed8936", guard: "#2b6cb0",
  };
  // Incident kinds (what the silence looked like) and resolutions (what it turned out to be);
  // "open" and "resolving" stand in for the resolution until there is one.
  const INCIDENT_KIND_COLORS = {
    unreachable: "#63171b", agent_down: "#805ad5", planned: "#718096", paused: "#a0aec0",
  };
  const RESOLUTION_COLORS = {
    rebooted: "#e53e3e", stall: "#d69e2e", network_partition: "#3182ce", agent_recovered: "#38a169",
    planned_reboot: "#4a5568", returned: "#68d391", unpaused: "#a0aec0", open: "#9b2c2c", resolving: "#ed8936",
  };
  const INCIDENT_COLORS = { ...INCIDENT_KIND_COLORS, ...RESOLUTION_COLORS };
  function colorFor(map, key, fallback = "#718096") { return map[key] || fallback; }

  window.FW = { api, HttpError, el, clock, duration, ago, now, gib, num, pct, listOf, poll, pageConfig, notice, KIND_COLORS, INCIDENT_COLORS, INCIDENT_KIND_COLORS, RESOLUTION_COLORS, colorFor };
})();
