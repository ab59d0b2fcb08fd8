// tlsgate console UI: polls the JSON API every 2 s and renders the views (no dependencies).
"use strict";

const $ = (s, el) => (el || document).querySelector(s);
const $$ = (s, el) => Array.from((el || document).querySelectorAll(s));
const esc = escapeHtml;
const state = { overview: null, keyservers: null, history: null, selected: new Set(), view: "overview" };

async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: {} };
  // Changes are refused unless JSON or marked with this header (docs/SECURITY.md).
  if (method !== "GET") init.headers["x-tlsgate-request"] = "1";
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  if (r.status === 401) { location.href = "/login"; throw new Error("not logged in"); }
  const j = await r.json();
  if (!r.ok) {
    const problems = (j.problems || []).join("; ");
    throw new Error((j.error || ("HTTP " + r.status)) + (problems && !String(j.error).includes(problems) ? ": " + problems : ""));
  }
  return j;
}

function message(text, kind) {
  const m = $("#message");
  m.textContent = text;
  m.className = "banner " + (kind || "green");
  m.hidden = !text;
}

function when(ms) { return ms ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : "–"; }
function pct(v) { return v === null || v === undefined ? "–" : (v * 100).toFixed(1) + "%"; }

// ---- views -------------------------------------------------------------------------------

function showView(name) {
  state.view = name || "overview";
  for (const s of $$(".view")) s.hidden = s.id !== "view-" + state.view;
  for (const a of $$("nav a")) a.classList.toggle("active", a.dataset.view === state.view);
  refresh();
}

function renderOverview(o) {
  $("#cluster").textContent = o.cluster;
  $("#identity").textContent = o.identity;
  $("#version-badge").textContent = o.current_version ? "version " + o.current_version + (o.current_error ? " (unreadable)" : "") : "no document";
  $("#version-badge").className = "badge " + (o.in_sync && !o.current_error ? "ok" : "warn");
  const rb = $("#refused-banner");
  if (o.refused.length) {
    rb.innerHTML = o.refused.map((r) =>
      `<div class="refused" data-version="${r.version}"><b>Version ${r.version} refused</b> by ${r.nodes.map(esc).join(", ")}: ${r.reasons.map(esc).join("; ")}</div>`).join("");
    rb.hidden = false;
  } else rb.hidden = true;
  const sb = $("#store-banner");
  const storeErrs = o.nodes.filter((n) => n.store_error).map((n) => `${esc(n.node_id)}: ${esc(n.store_error)}`);
  if (o.store_error) storeErrs.unshift("console: " + esc(o.store_error));
  sb.innerHTML = storeErrs.length ? "<b>Control store unreachable</b> — nodes keep their last good version. " + storeErrs.join("; ") : "";
  sb.hidden = !storeErrs.length;

  const c = o.current;
  const last = o.series.length ? o.series[o.series.length - 1] : {};
  $("#overview-cards").innerHTML = [
    ["Current version", o.current_version ? `${o.current_version}` : "–",
      c ? `by ${esc(c.author)} at ${when(c.at)}${c.comment ? " — " + esc(c.comment) : ""}` : o.current_error ? `<span class="bad">${esc(o.current_error)}</span>` : "nothing published"],
    ["Nodes", `${o.nodes.length}`, o.in_sync ? "all on the current version" : "not all on the current version"],
    ["Handshakes/s", `${fmtNum((last.full || 0) + (last.resumed || 0))}`, `full ${fmtNum(last.full)}, resumed ${fmtNum(last.resumed)}`],
    ["Latency", `${fmtNum(last.p99_ms)} ms`, `p99 (p50 ${fmtNum(last.p50_ms)} ms)`],
    ["Session cache", pct(last.hit_rate), "hit rate"],
  ].map(([h, v, s]) => `<div class="card"><h3>${h}</h3><div class="big">${v}</div><div class="sub">${s}</div></div>`).join("");

  const pts = (k) => o.series.map((p) => [p.t, p[k]]);
  lineChart($("#chart-handshakes"), [{ name: "full", points: pts("full") }, { name: "resumed", points: pts("resumed") }], { unit: "/s" });
  lineChart($("#chart-latency"), [{ name: "p50", points: pts("p50_ms") }, { name: "p99", points: pts("p99_ms") }], { unit: "ms" });
  lineChart($("#chart-failures"), [{ name: "failures", color: "#dc2626", points: pts("failures") }], { unit: "/s" });
  lineChart($("#chart-hitrate"), [{ name: "hit rate", points: o.series.map((p) => [p.t, p.hit_rate === null ? null : p.hit_rate * 100]) }], { unit: "%", max: 100 });

  $("#nodes-table tbody").innerHTML = o.nodes.map((n) => {
    const f = n.figures || {};
    const health = n.store_error ? `<span class="warn">store unreachable</span>`
      : n.scrape_error ? `<span class="warn">metrics: ${esc(n.scrape_error)}</span>` : `<span class="ok">ok</span>`;
    const refused = n.rejected ? ` <span class="bad" title="${esc(n.rejected.reasons.join("; "))}">refused ${n.rejected.version}</span>` : "";
    const errs = Object.entries(f.errors || {}).map(([k, v]) => `${esc(k)}: ${v}`).join(", ") || "none";
    return `<tr data-node="${esc(n.node_id)}"><td>${esc(n.node_id)}<div class="sub">${esc(n.admin_url || "")}</div></td>
      <td class="applied">${n.applied_version ?? "TOML only"}${refused}</td><td>${health}</td>
      <td>${fmtNum(f.full_per_s)}</td><td>${fmtNum(f.resumed_per_s)}</td><td>${fmtNum(f.p50_ms)}</td><td>${fmtNum(f.p99_ms)}</td><td>${errs}</td></tr>`;
  }).join("");

  const now = Date.now() / 1000;
  $("#certs-table tbody").innerHTML = o.nodes.flatMap((n) => ((n.figures || {}).certificates || []).map((c) => {
    const days = (c.not_after - now) / 86400;
    const expiry = days < 0 ? `<span class="bad">expired</span>` : days < 21 ? `<span class="warn">${fmtNum(days)} d</span>` : `${fmtNum(days)} d`;
    const staple = c.staple_present === null ? "not stapled" : c.staple_present ? '<span class="ok">stapled</span>' : '<span class="warn">none</span>';
    let acme = "–";
    if (c.acme) {
      const renew = (c.acme.renewal_at - now) / 86400;
      const next = renew <= 0 ? "now" : renew < 1 ? `in ${fmtNum(renew * 24)} h` : `in ${fmtNum(renew)} d`;
      acme = !c.acme.issued ? '<span class="warn">placeholder</span>' : '<span class="ok">issued</span>';
      acme += c.acme.failures > 0 ? ` · <span class="bad">${fmtNum(c.acme.failures)} failed, retry ${next}</span>` : ` · renews ${next}`;
    }
    const dc = c.delegated_credential_expiry === null ? "–" : `${fmtNum((c.delegated_credential_expiry - now) / 3600)} h`;
    return `<tr><td>${esc(c.site)}</td><td>${esc(c.cert)}</td><td>${esc(n.node_id)}</td><td>${expiry}</td><td>${fmtNum(c.chain_bytes)}</td><td>${staple}</td>
     <td>${c.staple_age_s === null ? "–" : fmtNum(c.staple_age_s / 3600) + " h"}</td><td>${acme}</td><td>${dc}</td></tr>`;
  })).join("") || `<tr><td colspan="9" class="hint">no certificates reported</td></tr>`;

  $("#sessions-table tbody").innerHTML = o.nodes.map((n) => {
    const s = (n.figures || {}).session_cache || {};
    return `<tr><td>${esc(n.node_id)}</td><td>${pct(s.hit_rate)}</td><td>${s.hits ?? "–"}</td><td>${s.misses ?? "–"}</td><td>${s.remote_hits ?? "–"}</td>
      <td>${s.entries ?? "–"}</td><td>${s.breaker_open ? '<span class="bad">open</span>' : '<span class="ok">closed</span>'} (opened ${s.breaker_opened_total ?? 0}×)</td>
      <td>${s.tickets_issued ?? "–"} / ${s.tickets_accepted ?? "–"}</td></tr>`;
  }).join("");
}

function memberKey(pool, address) { return pool + "\u0000" + address; }

function renderKeyservers(k) {
  const o = state.overview;
  if (o) {
    const names = Array.from(new Set(o.series.flatMap((p) => Object.keys(p.ks_ops))));
    lineChart($("#chart-ksops"), names.map((n) => ({ name: n, points: o.series.map((p) => [p.t, p.ks_ops[n] ?? null]) })), { unit: "/s" });
  }
  const sel = $("#add-pool");
  const current = sel.value;
  sel.innerHTML = k.pools.map((p) => `<option>${esc(p.name)}</option>`).join("");
  if (current) sel.value = current;
  $("#pools").innerHTML = k.pools.map((p) => `<h2>Pool ${esc(p.name)}</h2>
    <table class="pool" data-pool="${esc(p.name)}"><thead><tr><th><input type="checkbox" class="select-all" title="select all"></th>
      <th>address</th><th>health</th><th>state</th><th>weight</th><th>in flight</th><th>ops/s</th><th>signed</th><th>errors/s</th><th>latency</th><th>nodes healthy</th><th>actions</th></tr></thead>
    <tbody>${p.members.map((m) => {
      const key = memberKey(p.name, m.address);
      const drained = m.drain;
      return `<tr data-address="${esc(m.address)}" class="${drained ? "drained" : ""}">
        <td><input type="checkbox" class="select" data-pool="${esc(p.name)}" data-address="${esc(m.address)}" ${state.selected.has(key) ? "checked" : ""}></td>
        <td>${esc(m.address)}${m.in_document ? "" : ' <span class="sub">(TOML)</span>'}</td>
        <td><span class="health ${esc(m.health)}">${esc(m.health)}</span></td>
        <td>${drained ? '<span class="warn">drained</span>' : "active"}</td><td>${m.weight}</td>
        <td>${fmtNum(m.in_flight ?? 0)}</td><td class="ops">${fmtNum(m.ops_per_s ?? 0)}</td><td class="ops-total">${m.ops_total ?? 0}</td><td>${fmtNum(m.errors_per_s ?? 0)}</td>
        <td>${m.latency_ms === undefined ? "–" : fmtNum(m.latency_ms) + " ms"}</td>
        <td>${m.nodes_healthy ?? 0}/${m.nodes_seen ?? 0}</td>
        <td class="actions">
          <button data-op="${drained ? "undrain" : "drain"}" data-pool="${esc(p.name)}" data-address="${esc(m.address)}">${drained ? "Undrain" : "Drain"}</button>
          <button data-op="remove" class="danger" data-pool="${esc(p.name)}" data-address="${esc(m.address)}">Remove</button>
        </td></tr>`;
    }).join("")}</tbody></table>`).join("") || '<p class="hint">No key-server pools in the document yet: add a member below.</p>';
  updateSelection();
}

function renderHistory(h) {
  const cur = state.overview ? state.overview.current_version : null;
  $("#history-table tbody").innerHTML = h.entries.map((e) => {
    const changes = e.changes.map((c) => {
      const v = (x) => x === undefined ? "" : esc(JSON.stringify(x));
      return `<div class="change ${c.kind}">${esc(c.kind)} <code>${esc(c.path)}</code> ${v(c.old)}${c.old !== undefined && c.new !== undefined ? " → " : ""}${v(c.new)}</div>`;
    }).join("") + e.problems.map((p) => `<div class="bad">! ${esc(p)}</div>`).join("");
    const rb = e.version === cur ? '<span class="badge ok">current</span>'
      : `<button class="rollback" data-version="${e.version}">Roll back to ${e.version}</button>`;
    return `<tr data-version="${e.version}"><td>${e.version}${e.rollback_of ? `<div class="sub">rollback of ${e.rollback_of}</div>` : ""}</td>
      <td>${esc(e.author)}</td><td>${when(e.at)}</td><td>${esc(e.comment || "")}</td><td>${changes}</td><td>${rb}</td></tr>`;
  }).join("");
}

// ---- actions -----------------------------------------------------------------------------

async function edit(pool, edits) {
  const comment = $("#edit-comment").value.trim();
  try {
    const r = await api("POST", `/api/pools/${encodeURIComponent(pool)}/members`, comment ? { edits, comment } : edits);
    message(`Published version ${r.version}: ${r.changes.length} change(s) in pool ${pool}.`, "green");
    state.selected.clear();
    $("#edit-comment").value = "";
  } catch (e) { message("Refused: " + e.message, "red"); }
  refresh();
}

function selectedByPool() {
  const by = {};
  for (const key of state.selected) {
    const [pool, address] = key.split("\u0000");
    (by[pool] = by[pool] || []).push(address);
  }
  return by;
}

async function bulk(op) {
  const weight = parseInt($("#bulk-weight-value").value, 10);
  for (const [pool, addresses] of Object.entries(selectedByPool())) {
    await edit(pool, addresses.map((address) => (op === "weight" ? { op, address, weight } : { op, address })));
  }
}

function updateSelection() {
  const n = state.selected.size;
  $("#selected-count").textContent = `${n} selected`;
  for (const b of ["#bulk-drain", "#bulk-undrain", "#bulk-remove", "#bulk-weight"]) $(b).disabled = n === 0;
}

async function rollback(version) {
  try {
    const r = await api("POST", `/api/rollback/${version}`, { comment: `rollback to ${version} from the console` });
    message(`Published version ${r.version}, equal to version ${r.rollback_of}.`, "green");
  } catch (e) { message("Rollback refused: " + e.message, "red"); }
  refresh();
}

document.addEventListener("click", (ev) => {
  const t = ev.target;
  if (t.matches("button[data-op]")) edit(t.dataset.pool, [{ op: t.dataset.op, address: t.dataset.address }]);
  else if (t.matches("button.rollback")) rollback(t.dataset.version);
  else if (t.matches("#bulk-drain")) bulk("drain");
  else if (t.matches("#bulk-undrain")) bulk("undrain");
  else if (t.matches("#bulk-remove")) bulk("remove");
  else if (t.matches("#bulk-weight")) bulk("weight");
});

document.addEventListener("change", (ev) => {
  const t = ev.target;
  if (t.matches("input.select")) {
    const key = memberKey(t.dataset.pool, t.dataset.address);
    if (t.checked) state.selected.add(key); else state.selected.delete(key);
    updateSelection();
  } else if (t.matches("input.select-all")) {
    for (const box of $$("input.select", t.closest("table"))) {
      box.checked = t.checked;
      const key = memberKey(box.dataset.pool, box.dataset.address);
      if (t.checked) state.selected.add(key); else state.selected.delete(key);
    }
    updateSelection();
  }
});

$("#add-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const pool = $("#add-pool-new").value.trim() || $("#add-pool").value;
  if (!pool) { message("Choose or name a pool.", "red"); return; }
  const e = { op: "add", address: $("#add-address").value.trim(), weight: parseInt($("#add-weight").value, 10) || 1, drain: $("#add-drain").checked };
  edit(pool, [e]).then(() => { $("#add-address").value = ""; $("#add-pool-new").value = ""; });
});

// ---- polling -----------------------------------------------------------------------------

let busy = false;
async function refresh() {
  if (busy) return;
  busy = true;
  try {
    state.overview = await api("GET", "/api/overview");
    renderOverview(state.overview);
    if (state.view === "keyservers") { state.keyservers = await api("GET", "/api/keyservers"); renderKeyservers(state.keyservers); }
    if (state.view === "history") { state.history = await api("GET", "/api/history?limit=50"); renderHistory(state.history); }
    document.body.dataset.updated = String(Date.now());
  } catch (e) {
    if (e.message !== "not logged in") message("Console API: " + e.message, "red");
  } finally { busy = false; }
}

window.addEventListener("hashchange", () => showView(location.hash.slice(1)));
showView(location.hash.slice(1) || "overview");
setInterval(refresh, 2000);
