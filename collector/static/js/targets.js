/* Alert targets (/targets) over collector/api/webhooks.py:

   GET /api/v1/webhooks → [Target];  POST /api/v1/webhooks {url, format, secret?, events?, min_severity?}
   POST /api/v1/webhooks/{id}/test → {ok, status, error, msg_id, event: "test"};  DELETE /api/v1/webhooks/{id}
   Target = {"id", "url" (Apprise credentials masked), "format": json|slack|apprise, "has_secret",
             "source": env|api, "enabled", "events": [pattern] | null, "min_severity": str | null} */
(function () {
  "use strict";
  const { api, el, listOf } = window.FW;
  const tbody = document.querySelector("#targets tbody");
  const form = document.getElementById("add-form"), msg = document.getElementById("add-msg");

  async function test(t, out) {
    out.textContent = "sending…";
    try {
      const r = await api(`/api/v1/webhooks/${t.id}/test`, { method: "POST" });
      out.textContent = r.ok ? "test sent" : `failed: ${r.error || r.status}`;
      out.className = r.ok ? "test-ok" : "test-failed";
    } catch (err) { out.textContent = err.message; out.className = "test-failed"; }
  }

  async function remove(t) {
    if (!window.confirm(`Delete target #${t.id} (${t.url})? Its delivery history goes with it.`)) return;
    await api(`/api/v1/webhooks/${t.id}`, { method: "DELETE" });
    await load();
  }

  function row(t) {
    const out = el("span", { class: "muted" });
    return el("tr", { dataset: { target: t.id, format: t.format } },
      el("td", {}, `#${t.id}`),
      el("td", {}, t.format, t.has_secret ? el("span", { class: "tag", title: "signed" }, "signed") : null),
      el("td", {}, el("code", {}, t.url)),
      el("td", {}, t.events ? t.events.join(", ") : "all"),
      el("td", { class: "hide-narrow" }, t.min_severity || "any"),
      el("td", { class: "hide-narrow" }, t.source),
      el("td", {}, t.enabled ? "yes" : "no"),
      el("td", {},
        el("button", { type: "button", class: "test", onclick: () => test(t, out) }, "Test"), " ",
        t.source === "api" ? el("button", { type: "button", class: "delete", onclick: () => remove(t).catch((e) => window.alert(e.message)) }, "Delete") : null,
        " ", out));
  }

  async function load() {
    const targets = listOf(await api("/api/v1/webhooks"), "webhooks");
    tbody.replaceChildren(...(targets.length ? targets.map(row)
      : [el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No alert targets yet: add one below."))]));
  }

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const events = form.events.value.split(",").map((s) => s.trim()).filter(Boolean);
    const body = { url: form.url.value.trim(), format: form.format.value,
      events: events.length ? events : null, min_severity: form.min_severity.value || null };
    if (form.secret.value.trim()) body.secret = form.secret.value.trim();
    try {
      await api("/api/v1/webhooks", { method: "POST", body });
      form.reset();
      msg.textContent = "added";
      await load();
    } catch (err) { msg.textContent = err.message; }
  });
  load().catch((err) => { msg.textContent = err.message; });
})();
