/* freezewatch shared helpers: JSON fetch, formatting, DOM building, polling. No dependencies. */
(function () {
  "use strict";

  class HttpError extends Error {
    constructor(status, detail) { super(`HTTP ${status}: ${detail}`); this.status = status; }
  }

  /** fetch, but a GET that failed in the network (no answer: a dropped connection, the
   * browser's network changed under it) is asked again, twice, half a second apart: a read
   * asked twice changes nothing, and a view drawn once (a zoom) has no poll to mend it. */
  async function fetchAgain(url, init) {
    for (let attempt = 0; ; attempt++) {
      try { return await fetch(url, init); }
      catch (err) {
        if (init.method !== "GET" || attempt >= 2) throw err;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }

  /** GET/POST JSON with the login cookie; throws HttpError (401 sends the user to /login). */
  async function api(path, { method = "GET", body, params, text = false } = {}) {
    const url = new URL(path, location.origin);
    for (const [k, v] of Object.entries(params || {})) {
      if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, v);
    }
    const init = { method, headers: { Accept: text ? "text/plain, text/markdown" : "application/json" }, credentials: "same-origin" };
    if (body !== undefined) { init.body = JSON.stringify(body); init.headers["Content-Type"] = "application/json"; }
    const resp = await fetchAgain(url, init);
    if (resp.status === 401) { location.href = `/login?next=${encodeURIComponent(location.pathname + location.search)}`; throw new HttpError(401, "login"); }
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

  // Time: one 24 h format everywhere, in UTC or the browser's zone (a switch in the header,
  // remembered in localStorage); tzLabel() names the zone next to the times.
  const TZ_KEY = "fw-tz";
  const tzMode = () => (localStorage.getItem(TZ_KEY) === "utc" ? "utc" : "local");
  const pad = (n) => String(n).padStart(2, "0");
  function parts(ts) {
    const d = new Date(ts * 1000), u = tzMode() === "utc";
    return {
      y: u ? d.getUTCFullYear() : d.getFullYear(), mo: (u ? d.getUTCMonth() : d.getMonth()) + 1,
      d: u ? d.getUTCDate() : d.getDate(), h: u ? d.getUTCHours() : d.getHours(),
      mi: u ? d.getUTCMinutes() : d.getMinutes(), s: u ? d.getUTCSeconds() : d.getSeconds(),
    };
  }
  function clock(ts, withDate = true) {
    if (ts === null || ts === undefined) return "–";
    const p = parts(ts);
    const time = `${pad(p.h)}:${pad(p.mi)}:${pad(p.s)}`;
    return withDate ? `${p.y}-${pad(p.mo)}-${pad(p.d)} ${time}` : time;
  }
  function offsetText(ts) {
    const off = -new Date((ts ?? Date.now() / 1000) * 1000).getTimezoneOffset();
    return `UTC${off < 0 ? "−" : "+"}${pad(Math.floor(Math.abs(off) / 60))}:${pad(Math.abs(off) % 60)}`;
  }
  /** The zone the page's times are in: "UTC", or the browser's zone and offset. */
  function tzLabel(ts) {
    if (tzMode() === "utc") return "UTC";
    const name = Intl.DateTimeFormat().resolvedOptions().timeZone;
    return name && name !== "UTC" && name !== "Etc/UTC" ? `${name} (${offsetText(ts)})` : `local (${offsetText(ts)})`;
  }
  /** A time with its zone: "2026-05-01 14:03:22 UTC". */
  const clockTz = (ts, withDate = true) => (ts == null ? "–" : `${clock(ts, withDate)} ${tzMode() === "utc" ? "UTC" : offsetText(ts)}`);
  /** A range-picker text "YYYY-MM-DD HH:MM[:SS]" in the chosen zone, and back (null: unreadable). */
  const inputValue = (ts) => clock(ts);
  function fromInputValue(v) {
    const m = /^\s*(\d{4})-(\d{1,2})-(\d{1,2})[ T](\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d+)?))?\s*$/.exec(v || "");
    if (!m) return null;
    const [y, mo, d, h, mi] = m.slice(1, 6).map(Number), sec = Number(m[6] || 0);
    const ms = tzMode() === "utc" ? Date.UTC(y, mo - 1, d, h, mi, 0) : new Date(y, mo - 1, d, h, mi, 0).getTime();
    return ms / 1000 + sec;
  }
  function setTzMode(mode) { localStorage.setItem(TZ_KEY, mode); location.reload(); }

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

  // Colours per kernel-event kind (mid tones that read on light and dark panels).
  const KIND_COLORS = {
    xid: "#e53e3e", nv_err: "#dd6b20", gsp: "#d53f8c", uvm: "#9f7aea", bus_off: "#f56565", aer: "#c05621",
    iommu: "#319795",
    soft_lockup: "#d69e2e", hung_task: "#c9a227", rcu_stall: "#b7791f", oom_kill: "#fc5c65",
    alloc_failure: "#ed8936", guard: "#4299e1",
  };
  // Incident kinds (what the silence looked like) and resolutions (what it turned out to be);
  // "open" and "resolving" stand in for the resolution until there is one. CSS variables
  // (app.css), so dark mode has its own shades.
  const INCIDENT_KINDS = ["unreachable", "agent_down", "planned", "paused"];
  const RESOLUTIONS = ["rebooted", "stall", "network_partition", "agent_recovered", "planned_reboot", "returned", "unpaused", "open", "resolving"];
  const cssColors = (names) => Object.fromEntries(names.map((k) => [k, `var(--inc-${k.replace(/_/g, "-")})`]));
  const INCIDENT_KIND_COLORS = cssColors(INCIDENT_KINDS);
  const RESOLUTION_COLORS = cssColors(RESOLUTIONS);
  const INCIDENT_COLORS = { ...INCIDENT_KIND_COLORS, ...RESOLUTION_COLORS };
  function colorFor(map, key, fallback = "var(--muted)") { return map[key] || fallback; }
  const label = (s) => String(s ?? "").replace(/_/g, " ");
  const outcome = (inc) => inc.resolution || inc.state || "open";

  // One hover card for the page: show(anchor, ...children) beside the anchor, hide().
  const card = el("div", { class: "fw-tip", hidden: true, role: "tooltip" });
  function showCard(anchor, ...children) {
    if (!card.isConnected) document.body.append(card);
    card.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
    card.hidden = false;
    const r = anchor.getBoundingClientRect();
    card.style.left = `${Math.max(4, Math.min(r.left + 10, window.innerWidth - card.offsetWidth - 8))}px`;
    const below = r.bottom + 6;
    card.style.top = `${below + card.offsetHeight > window.innerHeight ? Math.max(4, r.top - card.offsetHeight - 6) : below}px`;
  }
  function hideCard() { card.hidden = true; }
  /** Show what content() returns while the pointer (or focus) is on node. */
  function hoverCard(node, content) {
    const show = () => showCard(node, content());
    node.addEventListener("mouseenter", show);
    node.addEventListener("focus", show);
    node.addEventListener("mouseleave", hideCard);
    node.addEventListener("blur", hideCard);
    return node;
  }

  // The page's state in its URL: read, and write (push: a step Back returns to).
  const query = () => new URLSearchParams(location.search);
  function setQuery(values, { push = false, state } = {}) {
    const q = query();
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined || v === null || v === "" || v === false) q.delete(k); else q.set(k, v);
    }
    const url = `${location.pathname}${q.toString() ? `?${q}` : ""}${location.hash}`;
    if (url === `${location.pathname}${location.search}${location.hash}`) return;
    history[push ? "pushState" : "replaceState"](state === undefined ? history.state : state, "", url);
  }

  // The header's time-zone switch (base.html), and times the server wrote as <time data-ts>.
  function decorate() {
    const toggle = document.getElementById("tz-toggle");
    if (toggle) {
      toggle.textContent = `Times: ${tzLabel()}`;
      toggle.title = `Times are shown in ${tzMode() === "utc" ? "UTC" : "this browser's zone"}; click for ${tzMode() === "utc" ? "local time" : "UTC"} (remembered in this browser)`;
      toggle.dataset.tz = tzMode();
      toggle.addEventListener("click", () => setTzMode(tzMode() === "utc" ? "local" : "utc"));
    }
    for (const t of document.querySelectorAll("time[data-ts]")) t.textContent = clock(Number(t.dataset.ts));
    for (const t of document.querySelectorAll(".tz-label")) t.textContent = tzMode() === "utc" ? "UTC" : offsetText();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", decorate); else decorate();

  window.FW = {
    api, HttpError, el, clock, clockTz, tzMode, tzLabel, inputValue, fromInputValue, duration, ago, now, gib, num, pct,
    listOf, poll, pageConfig, notice, query, setQuery, showCard, hideCard, hoverCard, label, outcome,
    KIND_COLORS, INCIDENT_COLORS, INCIDENT_KIND_COLORS, RESOLUTION_COLORS, colorFor,
  };
})();
