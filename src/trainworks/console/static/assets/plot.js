// Hand-made SVG scatter plots (no chart library): points, an optional step line, axes with ticks.

const NS = "http://www.w3.org/2000/svg";
const W = 480;
const H = 280;
const M = { left: 60, right: 16, top: 16, bottom: 44 };

function s(tag, attrs = {}, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

function ticks(min, max, count = 5) {
  if (min === max) return [min];
  const step = (max - min) / (count - 1);
  return Array.from({ length: count }, (_, i) => min + i * step);
}

function fmt(v) {
  const a = Math.abs(v);
  if (a !== 0 && (a < 0.01 || a >= 1e5)) return v.toExponential(1);
  return Number(v.toFixed(a < 1 ? 3 : 2)).toString();
}

/**
 * points: [{x, y, label}]; x may be a string for categories (placed at even steps).
 * options: {title, xLabel, yLabel, line: [{x, y}] drawn as a step line (best so far), logX}.
 */
export function scatter(points, { title, xLabel, yLabel, line = null, logX = false } = {}) {
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", class: "plot", "aria-label": title });
  svg.append(s("title", {}, title));
  const categories = [...new Set(points.filter((p) => typeof p.x === "string").map((p) => p.x))].sort();
  const xOf = (x) => (typeof x === "string" ? categories.indexOf(x) : logX ? Math.log10(x) : x);
  const xs = points.map((p) => xOf(p.x)).concat((line || []).map((p) => xOf(p.x)));
  const ys = points.map((p) => p.y).concat((line || []).map((p) => p.y));
  if (!points.length) {
    svg.append(s("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "axis-label" }, "No measurements yet"));
    return svg;
  }
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (categories.length) [x0, x1] = [-0.5, categories.length - 0.5];
  if (x0 === x1) [x0, x1] = [x0 - 1, x1 + 1];
  if (y0 === y1) [y0, y1] = [y0 - 1, y1 + 1];
  const px = (x) => M.left + ((xOf(x) - x0) / (x1 - x0)) * (W - M.left - M.right);
  const py = (y) => H - M.bottom - ((y - y0) / (y1 - y0)) * (H - M.top - M.bottom);

  const axes = s("g", { class: "axes" });
  axes.append(s("line", { x1: M.left, y1: H - M.bottom, x2: W - M.right, y2: H - M.bottom }));
  axes.append(s("line", { x1: M.left, y1: M.top, x2: M.left, y2: H - M.bottom }));
  for (const t of ticks(y0, y1)) {
    axes.append(s("text", { x: M.left - 6, y: py(t) + 4, "text-anchor": "end" }, fmt(t)));
    axes.append(s("line", { class: "grid", x1: M.left, y1: py(t), x2: W - M.right, y2: py(t) }));
  }
  const xTicks = categories.length
    ? categories.map((c) => [c, c])
    : ticks(x0, x1).map((t) => [logX ? 10 ** t : t, fmt(logX ? 10 ** t : t)]);
  for (const [value, label] of xTicks) {
    axes.append(s("text", { x: px(value), y: H - M.bottom + 16, "text-anchor": "middle" }, label));
  }
  axes.append(s("text", { class: "axis-label", x: (W + M.left) / 2, y: H - 6, "text-anchor": "middle" }, xLabel));
  axes.append(s("text", { class: "axis-label", x: 14, y: (H - M.bottom) / 2, transform: `rotate(-90 14 ${(H - M.bottom) / 2})`, "text-anchor": "middle" }, yLabel));
  svg.append(axes);

  if (line && line.length) {
    let d = "";
    line.forEach((p, i) => {
      d += i === 0 ? `M${px(p.x)},${py(p.y)}` : `H${px(p.x)}V${py(p.y)}`;
    });
    svg.append(s("path", { class: "best", d, fill: "none" }));
  }
  const dots = s("g", { class: "points" });
  for (const p of points) {
    const c = s("circle", { cx: px(p.x), cy: py(p.y), r: 4 });
    c.append(s("title", {}, p.label || `${p.x}: ${p.y}`));
    dots.append(c);
  }
  svg.append(dots);
  return svg;
}
