#include "causeway/observe/web_page.h"

namespace causeway::observe {
namespace {

// Plain HTML, CSS and JavaScript: no framework, nothing from a CDN.
constexpr char kPage[] = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>causeway</title>
<style>
:root { --busy:#2e9e44; --waiting:#d9a400; --idle:#5b7db8; --spare:#9aa3ad; --dead:#c53030; --unknown:#c7ccd1;
        --bg:#f6f7f9; --fg:#1d232b; --muted:#66707a; --card:#fff; --line:#dde1e6; }
* { box-sizing: border-box; }
body { margin:0; font:13px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background:var(--bg); color:var(--fg); }
header { display:flex; align-items:baseline; gap:18px; padding:10px 18px; background:#1d232b; color:#fff; }
header h1 { font-size:16px; margin:0; letter-spacing:.5px; }
header .sum { color:#c9d1d9; }
header .conn { margin-left:auto; font-size:12px; }
header .conn.bad { color:#ff9b9b; }
main { display:grid; grid-template-columns: minmax(0,3fr) minmax(320px,2fr); gap:14px; padding:14px 18px; }
section { background:var(--card); border:1px solid var(--line); border-radius:6px; padding:10px 12px; margin-bottom:14px; }
section h2 { font-size:13px; margin:0 0 8px; text-transform:uppercase; letter-spacing:.6px; color:var(--muted); }
.island { margin-bottom:10px; }
.island > .title { font-weight:600; margin-bottom:4px; }
.hosts { display:flex; flex-wrap:wrap; gap:8px; }
.host { border:1px solid var(--line); border-radius:5px; padding:6px; min-width:150px; }
.host.dead { border-color:var(--dead); background:#fdf0f0; }
.host .title { font-size:12px; color:var(--muted); margin-bottom:4px; display:flex; justify-content:space-between; gap:8px; }
.devices { display:flex; flex-wrap:wrap; gap:6px; }
.dev { width:150px; border-radius:4px; padding:5px 6px; color:#fff; cursor:pointer; border:2px solid transparent; }
.dev.sel { border-color:#1d232b; }
.dev .id { font-weight:600; display:flex; justify-content:space-between; }
.dev .op { font-size:11px; white-space:nowrap; overflow:hidden; text-overflow:ellipsis; min-height:15px; }
.dev .q { font-size:11px; opacity:.9; }
.bar { height:5px; background:rgba(255,255,255,.35); border-radius:3px; overflow:hidden; margin-top:3px; }
.bar > div { height:100%; background:#fff; }
.s-busy { background:var(--busy); } .s-waiting { background:var(--waiting); } .s-idle { background:var(--idle); }
.s-spare { background:var(--spare); } .s-dead { background:var(--dead); } .s-unknown { background:var(--unknown); color:#333; }
.legend span { display:inline-block; margin-right:10px; font-size:12px; }
.legend i { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:4px; vertical-align:-1px; }
table { border-collapse:collapse; width:100%; }
th, td { text-align:left; padding:3px 6px; border-bottom:1px solid var(--line); vertical-align:top; }
th { font-weight:600; color:var(--muted); font-size:12px; }
td.num { text-align:right; font-variant-numeric:tabular-nums; }
.empty { color:var(--muted); font-style:italic; }
.reason { color:var(--dead); }
canvas { width:100%; height:150px; display:block; }
.chartkey span { font-size:12px; margin-right:12px; }
#detail pre { white-space:pre-wrap; margin:0; font:12px ui-monospace, monospace; }
#login { position:fixed; inset:0; background:rgba(20,24,30,.6); display:none; align-items:center; justify-content:center; }
#login form { background:#fff; padding:18px; border-radius:8px; width:360px; }
#login input { width:100%; padding:6px; margin:8px 0; font:inherit; }
</style>
</head>
<body>
<header><h1>causeway</h1><span class="sum" id="summary">connecting…</span><span class="conn" id="conn"></span></header>
<main>
<div>
  <section><h2>Devices</h2>
    <div class="legend"><span><i class="s-busy"></i>busy</span><span><i class="s-waiting"></i>waiting for an input or memory</span><span><i class="s-idle"></i>idle</span><span><i class="s-spare"></i>spare</span><span><i class="s-dead"></i>dead</span></div>
    <div id="grid" style="margin-top:8px"></div>
  </section>
  <section id="detail"><h2>Device</h2><div class="empty">Click a device to see its running and queued ops and what each waits for.</div></section>
  <section><h2>Activity (last minutes)</h2>
    <div class="chartkey"><span style="color:#2e6fd6">■ launches/s (5 s mean)</span><span style="color:#2e9e44">■ utilisation %</span></div>
    <canvas id="chart" width="800" height="150"></canvas>
  </section>
</div>
<div>
  <section><h2>Sessions</h2><div id="sessions"></div></section>
  <section><h2>Queued slice requests</h2><div id="requests"></div></section>
  <section><h2>Recent host deaths</h2><div id="deaths"></div></section>
  <section><h2>Recent failures</h2><div id="failures"></div></section>
  <section><h2>Transfers in flight</h2><div id="transfers"></div></section>
  <section><h2>History: finished sessions</h2><div id="history"></div></section>
  <section><h2>History: host deaths</h2><div id="history-deaths"></div></section>
</div>
</main>
<div id="login"><form id="loginform"><b>This head needs a token.</b><div class="empty">It is kept for this tab only (sessionStorage).</div><input type="password" id="token" placeholder="token" autocomplete="off"><button type="submit">Connect</button> <span id="loginerr" class="reason"></span></form></div>
<script>
"use strict";
const KEY = "causeway-token";
// A device to show at once: /#device=3 (a link to it).
let selected = (m => m ? Number(m[1]) : null)(location.hash.match(/device=(\d+)/)), last = null, timer = null;
const $ = (id) => document.getElementById(id);
function esc(s) { return String(s == null ? "" : s).replace(/[&<>"']/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;","\"":"&quot;","'":"&#39;"}[c])); }
function bytes(n) { if (n == null) return "?"; const u = ["B","KiB","MiB","GiB","TiB"]; let i = 0; while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; } return (i && n < 10 && n !== Math.round(n) ? n.toFixed(1) : Math.round(n)) + " " + u[i]; }
function ago(t, now) { const s = Math.max(0, now - t); return s < 60 ? s.toFixed(0) + " s ago" : s < 3600 ? (s / 60).toFixed(0) + " min ago" : (s / 3600).toFixed(1) + " h ago"; }
function clock(t) { return new Date(t * 1000).toLocaleTimeString(); }
function table(head, rows) {
  if (!rows.length) return '<div class="empty">none</div>';
  return "<table><tr>" + head.map(h => "<th>" + h + "</th>").join("") + "</tr>" + rows.map(r => "<tr>" + r.join("") + "</tr>").join("") + "</table>";
}
function td(v, cls) { return '<td' + (cls ? ' class="' + cls + '"' : '') + '>' + v + '</td>'; }

function opText(op) {
  let t = esc(op.program) + " seq " + op.seq + " part " + op.partition + " [" + esc(op.session) + "]";
  if (op.waiting_for_memory) t += " — waits for memory";
  if (op.waiting_for && op.waiting_for.length) t += " — waits for " + op.waiting_for.map(esc).join("; ");
  return t;
}

function renderGrid(s) {
  const devs = new Map(s.devices.map(d => [d.device, d]));
  let html = "";
  for (const isl of s.islands) {
    html += '<div class="island"><div class="title">island ' + isl.island + ' <span class="empty">epoch ' + isl.epoch + '</span></div><div class="hosts">';
    for (const hid of isl.hosts) {
      const h = s.hosts[hid];
      const age = h.heartbeat_age_seconds == null ? "" : "♥ " + h.heartbeat_age_seconds.toFixed(1) + " s";
      html += '<div class="host ' + esc(h.state) + '"><div class="title"><span>host ' + h.host + ' · ' + esc(h.state) + '</span><span>' + age + '</span></div>';
      if (h.death) html += '<div class="reason" style="font-size:11px;margin-bottom:4px">' + esc(h.death.reason) + '</div>';
      html += '<div class="devices">';
      for (const did of h.devices) {
        const d = devs.get(did); if (!d) continue;
        const used = d.memory.used_bytes, budget = d.memory.budget_bytes;
        const pct = used != null && budget ? Math.min(100, 100 * used / budget) : 0;
        const op = d.running ? esc(d.running.program) : (d.state === "waiting" && d.queued.length ? "⏳ " + esc(d.queued[0].program) : "&nbsp;");
        html += '<div class="dev s-' + esc(d.state) + (selected === d.device ? " sel" : "") + '" data-dev="' + d.device + '" title="' + esc(d.state) + '">' +
          '<div class="id"><span>dev ' + d.device + '</span><span>' + Math.round(100 * d.busy_ratio) + '%</span></div>' +
          '<div class="op">' + op + '</div>' +
          '<div class="q">queue ' + d.queue_length + ' · ' + bytes(used) + '/' + bytes(budget) + '</div>' +
          '<div class="bar"><div style="width:' + pct.toFixed(1) + '%"></div></div></div>';
      }
      html += "</div></div>";
    }
    html += "</div></div>";
  }
  if (!s.islands.length) html = '<div class="empty">no hosts have joined yet</div>';
  $("grid").innerHTML = html;
}

function renderDetail(s) {
  const el = $("detail");
  const d = s.devices.find(x => x.device === selected);
  if (!d) { el.innerHTML = '<h2>Device</h2><div class="empty">Click a device to see its running and queued ops and what each waits for.</div>'; return; }
  let t = "device " + d.device + " (host " + d.host + ", island " + d.island + ", " + esc(d.kind) + "): " + esc(d.state) + "\n";
  t += "sessions holding it: " + (d.sessions.length ? d.sessions.join(", ") : "none") + "\n";
  t += "memory " + bytes(d.memory.used_bytes) + " of " + bytes(d.memory.budget_bytes) + (d.memory.waiting_bytes ? ", " + bytes(d.memory.waiting_bytes) + " waiting" : "") + "\n";
  t += "busy " + Math.round(100 * d.busy_ratio) + "% of the last minute; " + d.ops_completed + " ops done; " + d.collective_seconds.toFixed(3) + " s in collectives\n\n";
  t += "running: " + (d.running ? opText(d.running) : "nothing") + "\n";
  t += "queued (" + d.queue_length + "):\n";
  if (!d.queued.length) t += "  none\n";
  for (const op of d.queued) t += "  " + opText(op) + "\n";
  if (d.queue_length > d.queued.length) t += "  … and " + (d.queue_length - d.queued.length) + " more\n";
  el.innerHTML = "<h2>Device " + d.device + "</h2><pre>" + t + "</pre>";
}

function renderChart(s) {
  const c = $("chart"), ctx = c.getContext("2d");
  const w = c.width = c.clientWidth * (window.devicePixelRatio || 1), h = c.height = 150 * (window.devicePixelRatio || 1);
  ctx.clearRect(0, 0, w, h);
  const pts = s.history;
  const pad = 28 * (window.devicePixelRatio || 1);
  ctx.strokeStyle = "#dde1e6"; ctx.lineWidth = 1;
  for (let i = 0; i <= 4; i++) { const y = pad / 2 + (h - pad) * i / 4; ctx.beginPath(); ctx.moveTo(pad, y); ctx.lineTo(w, y); ctx.stroke(); }
  ctx.fillStyle = "#66707a"; ctx.font = (11 * (window.devicePixelRatio || 1)) + "px sans-serif";
  if (pts.length < 2) { ctx.fillText("collecting…", pad + 6, h / 2); return; }
  const t0 = pts[0].time_unix_seconds, t1 = pts[pts.length - 1].time_unix_seconds;
  // Launches per second over a 5 s moving window: launches come in bursts
  // that a one-second sample shows as spikes.
  const rate = pts.map((p, i) => { const w = pts.slice(Math.max(0, i - 4), i + 1); return w.reduce((a, q) => a + q.launches_per_second, 0) / w.length; });
  const maxL = Math.max(1, ...rate);
  const x = t => pad + (w - pad) * (t1 > t0 ? (t - t0) / (t1 - t0) : 1);
  const y = v => pad / 2 + (h - pad) * (1 - v);
  ctx.fillText(maxL.toFixed(maxL < 10 ? 1 : 0) + "/s", 2, pad / 2 + 4);
  ctx.fillText("0", 2, h - pad / 2);
  ctx.fillStyle = "#2e9e44"; ctx.fillText("100%", w - 34 * (window.devicePixelRatio || 1), pad / 2 + 4); ctx.fillStyle = "#66707a";
  ctx.fillText(((t1 - t0) / 60).toFixed(1) + " min", w - 60 * (window.devicePixelRatio || 1), h - 2);
  const line = (color, f) => { ctx.strokeStyle = color; ctx.lineWidth = 2 * (window.devicePixelRatio || 1); ctx.beginPath(); pts.forEach((p, i) => { const X = x(p.time_unix_seconds), Y = y(f(p, i)); i ? ctx.lineTo(X, Y) : ctx.moveTo(X, Y); }); ctx.stroke(); };
  line("#2e6fd6", (p, i) => rate[i] / maxL);
  line("#2e9e44", p => p.utilisation);
}

function render(s) {
  const m = s.summary, st = m.device_states;
  $("summary").textContent = m.islands + " islands · " + m.hosts_alive + "/" + m.hosts + " hosts alive · " + m.devices + " devices (" +
    st.busy + " busy, " + st.waiting + " waiting, " + st.idle + " idle, " + st.spare + " spare, " + st.dead + " dead) · " +
    m.sessions + " sessions · " + m.launches + " launches, " + m.launch_failures + " failed";
  renderGrid(s);
  renderDetail(s);
  renderChart(s);
  $("sessions").innerHTML = table(["id", "name", "slices", "arrays", "execs", "waiting ops"], s.sessions.map(x => [
    td(x.session, "num"), td(esc(x.name)),
    td(x.slices.map(sl => "#" + sl.slice + " " + esc(sl.state) + (sl.devices.length ? " [" + sl.devices.join(",") + "]" : " (" + sl.requested_devices + " devices)") + (sl.generation > 1 ? " gen " + sl.generation : "") + (sl.failure ? ' <span class="reason">' + esc(sl.failure) + "</span>" : "")).join("<br>") || '<span class="empty">none</span>'),
    td(x.arrays, "num"), td(x.executables, "num"), td(x.deferred_ops, "num")]));
  $("requests").innerHTML = table(["slice", "session", "devices", "blocked by"], s.slice_requests.map(r => [
    td(r.slice_id, "num"), td(r.session, "num"), td(r.devices + (r.island == null ? "" : " on island " + r.island), "num"), td(esc(r.blocked_by))]));
  $("deaths").innerHTML = table(["host", "when", "reason"], s.deaths.map(d => [
    td(d.host, "num"), td(clock(d.time_unix_seconds) + '<br><span class="empty">' + ago(d.time_unix_seconds, s.time_unix_seconds) + "</span>"), td('<span class="reason">' + esc(d.reason) + "</span>")]));
  $("failures").innerHTML = table(["when", "device", "program", "code", "message"], s.failures.slice(0, 10).map(f => [
    td(clock(f.time_unix_seconds)), td(f.device, "num"), td(esc(f.program) + " seq " + f.seq), td(esc(f.code)), td(esc(f.message))]));
  $("transfers").innerHTML = table(["id", "from → to", "bytes", "age"], s.transfers_in_flight.map(t => [
    td(t.transfer, "num"), td(t.source_device + " → " + t.destination_device), td(bytes(t.bytes), "num"), td(t.age_seconds.toFixed(1) + " s", "num")]));
}

function renderHistory(h, now) {
  const programs = x => x.programs.map(p => esc(p.program) + " ×" + p.launches + " (" + p.device_seconds.toFixed(2) + " device s" +
    (p.failed_ops ? ', <span class="reason">' + p.failed_ops + " failed ops</span>" : "") + ")" +
    p.failures.slice(0, 2).map(f => '<br><span class="reason">' + esc(f.code) + ": " + esc(f.message) + "</span>").join("")).join("<br>") +
    (x.programs_dropped ? "<br>… " + x.programs_dropped + " more launches of other programs" : "");
  $("history").innerHTML = table(["ended", "session", "time", "launches", "programs", "why it ended"], h.sessions.slice(0, 20).map(x => [
    td(clock(x.ended_unix_seconds) + '<br><span class="empty">' + ago(x.ended_unix_seconds, now) + (x.head_run !== h.head_run ? " · head run " + x.head_run : "") + "</span>"),
    td("#" + x.session + " " + esc(x.name)), td(x.duration_seconds == null ? "?" : x.duration_seconds.toFixed(1) + " s", "num"),
    td(x.launches + (x.failed_ops ? '<br><span class="reason">' + x.failed_ops + " failed</span>" : ""), "num"),
    td(programs(x) || '<span class="empty">none</span>'), td(esc(x.end_reason) + (x.complete ? "" : ' <span class="empty">(some ops never reported)</span>'))]));
  $("history-deaths").innerHTML = table(["host", "when", "reason"], h.host_deaths.slice(0, 20).map(d => [
    td(d.host, "num"), td(clock(d.time_unix_seconds) + '<br><span class="empty">' + ago(d.time_unix_seconds, now) + (d.head_run !== h.head_run ? " · head run " + d.head_run : "") + "</span>"),
    td('<span class="reason">' + esc(d.reason) + "</span>")]));
}

// The token is proven, never sent (docs/security.md): each request carries
// a fresh HMAC-SHA256 of the time and a random nonce under the token, which
// the head accepts once. A browser gives WebCrypto only to secure pages
// (HTTPS, or loopback); elsewhere (plain HTTP off loopback, which the head
// serves only when told --insecure) the token itself goes.
const hex = b => Array.from(new Uint8Array(b), x => x.toString(16).padStart(2, "0")).join("");
async function authorization(token) {
  if (!(window.crypto && crypto.subtle)) return "Bearer " + token;
  const nonce = new Uint8Array(16);
  crypto.getRandomValues(nonce);
  const stamped = String(Date.now() * 1000) + ":" + hex(nonce);
  const utf8 = new TextEncoder();
  const key = await crypto.subtle.importKey("raw", utf8.encode(token), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = await crypto.subtle.sign("HMAC", key, utf8.encode("causeway call v1:" + stamped));
  return "Causeway-Proof v1:" + stamped + ":" + hex(mac);
}

async function get(path, token) {
  const headers = token ? { Authorization: await authorization(token) } : {};
  return fetch(path, { headers, cache: "no-store" });
}

let polls = 0;
async function poll() {
  const token = sessionStorage.getItem(KEY);
  try {
    const r = await get("/api/status", token);
    if (r.status === 401) {
      $("conn").textContent = "needs a token"; $("conn").className = "conn bad";
      const why = await r.json().then(j => j.error, () => "");
      $("loginerr").textContent = token ? "refused: " + why : "";
      $("login").style.display = "flex"; $("token").focus();
      return;  // Polling resumes once a token is given.
    }
    if (!r.ok) throw new Error("HTTP " + r.status);
    last = await r.json();
    render(last);
    // The history changes only as sessions end: every 5 s is enough.
    if (polls++ % 5 === 0) {
      const hr = await get("/api/history", token);
      if (hr.ok) renderHistory(await hr.json(), last.time_unix_seconds);
    }
    $("conn").textContent = "updated " + new Date().toLocaleTimeString(); $("conn").className = "conn";
  } catch (e) {
    $("conn").textContent = "head unreachable (" + e.message + "), retrying"; $("conn").className = "conn bad";
  }
  timer = setTimeout(poll, 1000);
}

$("grid").addEventListener("click", e => {
  const el = e.target.closest(".dev"); if (!el) return;
  const id = Number(el.dataset.dev);
  selected = selected === id ? null : id;
  history.replaceState(null, "", selected === null ? location.pathname : "#device=" + selected);
  if (last) { renderGrid(last); renderDetail(last); }
});
$("loginform").addEventListener("submit", e => {
  e.preventDefault();
  sessionStorage.setItem(KEY, $("token").value.trim());
  $("login").style.display = "none";
  clearTimeout(timer); poll();
});
poll();
</script>
</body>
</html>
)html";

}  // namespace

std::string_view WebPage() { return kPage; }

}  // namespace causeway::observe
