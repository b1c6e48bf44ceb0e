/* A matrix run's serving configuration per profile as vLLM's own log states it (the report's
   startup_plan fields of collector.matrix.served.CONFIG_KEYS), with the spec's ask beside a
   value that differs from it (config_mismatch) or that the log does not state (requested):
   what ran, not only what was asked for. Like the Markdown report, only fields some profile
   states or asks for get a column. Needs fw.js; matrix.js draws it. */
(function () {
  "use strict";
  const { el, listOf } = window.FW;
  const LABELS = {
    tensor_parallel_size: "TP", pipeline_parallel_size: "PP", data_parallel_size: "DP",
    max_model_len: "Max model len", gpu_memory_utilization: "GPU memory util.", dtype: "dtype",
    quantization: "Quantization", kv_cache_dtype: "KV cache dtype", enforce_eager: "Eager",
    max_num_seqs: "Max seqs", max_num_batched_tokens: "Max batched tokens", enable_chunked_prefill: "Chunked prefill",
    enable_prefix_caching: "Prefix caching", attention_backend: "Attention backend",
    speculative_method: "Speculative method", num_speculative_tokens: "Speculative tokens",
  };
  const KEYS = Object.keys(LABELS);
  const NUMERIC = new Set(["tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_model_len",
    "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens", "num_speculative_tokens"]);

  const text = (v) => (v === null || v === undefined ? "–" : typeof v === "boolean" ? (v ? "yes" : "no")
    : Number.isInteger(v) ? v.toLocaleString("en") : String(v));

  /** The fields some profile states or asks for, in the report's order. */
  const shown = (profiles) => KEYS.filter((k) => profiles.some((p) => (p.startup_plan || {})[k] != null || k in (p.requested || {})));

  /** vLLM's value of key for profile p; the spec's ask beside it where the two differ. */
  function value(p, key) {
    const said = (p.startup_plan || {})[key], asked = (p.requested || {})[key];
    const differs = key in (p.config_mismatch || {}), unsaid = said == null && asked !== undefined;
    const title = differs ? `the spec asked ${text(asked)}; vLLM's log says ${text(said)}`
      : unsaid ? `the spec asked ${text(asked)}; vLLM's log does not say` : "as vLLM's log states it";
    return el("span", { class: differs ? "served mismatch error" : "served", title, dataset: { key } }, text(said),
      differs || unsaid ? el("span", { class: "spec-ask muted" }, ` (spec: ${text(asked)})`) : null);
  }

  /** One row per profile x repetition, as the overview above it. */
  function table(profiles) {
    const keys = shown(profiles);
    if (!keys.length) return null;
    return el("div", { class: "table-wrap" }, el("table", { id: "served" },
      el("caption", { class: "muted" }, "Serving configuration, as vLLM's log states it (the spec's ask beside a value that differs)"),
      el("thead", {}, el("tr", {}, ["Profile", ...keys.map((k) => LABELS[k])].map((h) => el("th", {}, h)))),
      el("tbody", {}, profiles.map((p) => el("tr", { dataset: { profile: p.label || p.profile } },
        el("td", {}, p.label || p.profile), keys.map((k) => el("td", { class: NUMERIC.has(k) ? "num" : null, dataset: { key: k } }, value(p, k))))))));
  }

  /** label → value node, for one profile's section. */
  const fields = (p) => Object.fromEntries(shown([p]).map((k) => [LABELS[k], value(p, k)]));

  /** "B vs A, max_model_len: 131,072 vs 262,144 (vLLM's log)" for each field that differs. */
  const comparisons = (summary) => listOf(summary?.comparisons).flatMap((c) => Object.entries(c.config || {})
    .map(([k, d]) => `${c.profile} vs ${c.baseline}, ${LABELS[k] || k}: ${listOf(d.value).map(text).join(" or ")} vs ${listOf(d.baseline).map(text).join(" or ")} (vLLM's log)`));

  window.FW.served = { KEYS, LABELS, shown, value, table, fields, comparisons };
})();
