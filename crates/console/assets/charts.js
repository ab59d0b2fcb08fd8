// Minimal SVG line charts for the tlsgate console (no dependencies).
// lineChart(el, [{name, color, points: [[t_ms, value|null], ...]}], {unit, min})
"use strict";

const PALETTE = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];

function fmtNum(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  const a = Math.abs(v);
  if (a >= 1000) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  if (a >= 1) return v.toFixed(2);
  return v.toFixed(3);
}

function lineChart(el, series, opts) {
  opts = opts || {};
  const W = 520, H = 170, L = 48, R = 8, T = 8, B = 22;
  let tmin = Infinity, tmax = -Infinity, vmax = opts.max || 0, vmin = opts.min || 0;
  for (const s of series) for (const [t, v] of s.points) {
    if (t < tmin) tmin = t;
    if (t > tmax) tmax = t;
    if (v !== null && v > vmax) vmax = v;
  }
  if (!isFinite(tmin)) { el.innerHTML = '<p class="hint">no data yet</p>'; return; }
  if (tmax === tmin) tmax = tmin + 1;
  if (vmax <= vmin) vmax = vmin + 1;
  vmax *= 1.08;
  const x = (t) => L + (t - tmin) / (tmax - tmin) * (W - L - R);
  const y = (v) => T + (1 - (v - vmin) / (vmax - vmin)) * (H - T - B);
  let svg = `<svg viewBox="0 0 ${W} ${H}" class="linechart" xmlns="http://www.w3.org/2000/svg">`;
  for (let i = 0; i <= 4; i++) {
    const v = vmin + (vmax - vmin) * i / 4, yy = y(v);
    svg += `<line x1="${L}" x2="${W - R}" y1="${yy}" y2="${yy}" stroke="#e5e7eb"/>`;
    svg += `<text x="${L - 4}" y="${yy + 4}" text-anchor="end" font-size="10" fill="#6b7280">${fmtNum(v)}</text>`;
  }
  const span = Math.round((tmax - tmin) / 1000);
  svg += `<text x="${L}" y="${H - 6}" font-size="10" fill="#6b7280">-${span}s</text>`;
  svg += `<text x="${W - R}" y="${H - 6}" text-anchor="end" font-size="10" fill="#6b7280">now</text>`;
  series.forEach((s, i) => {
    const color = s.color || PALETTE[i % PALETTE.length];
    let d = "", pen = false;
    for (const [t, v] of s.points) {
      if (v === null || v === undefined) { pen = false; continue; }
      d += `${pen ? "L" : "M"}${x(t).toFixed(1)},${y(v).toFixed(1)} `;
      pen = true;
    }
    if (d) svg += `<path d="${d}" fill="none" stroke="${color}" stroke-width="1.8"/>`;
  });
  svg += "</svg>";
  const legend = series.map((s, i) => {
    const last = s.points.length ? s.points[s.points.length - 1][1] : null;
    const color = s.color || PALETTE[i % PALETTE.length];
    return `<span class="legend-item"><svg width="10" height="10"><rect width="10" height="10" fill="${color}"/></svg> ${escapeHtml(s.name)}: <b>${fmtNum(last)}</b>${opts.unit ? " " + escapeHtml(opts.unit) : ""}</span>`;
  }).join(" ");
  el.innerHTML = svg + `<div class="legend">${legend}</div>`;
}

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
