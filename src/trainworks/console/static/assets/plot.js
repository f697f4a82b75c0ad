// The tuning plots, drawn by uPlot (vendored: ../vendor/uplot-*/, see vendor/README.md): points per trial,
// an optional best-so-far step line, the values under the cursor in the legend (hover), drag to zoom (x and
// y), double-click to zoom back out.

import uPlot from "../vendor/uplot-1.6.32/uPlot.esm.js";
import { h, stylesheet } from "./ui.js";

stylesheet("/console/vendor/uplot-1.6.32/uPlot.min.css");

const WIDTH = 480; // until the figure is laid out: then the chart takes the figure's width
const HEIGHT = 280;

function color(name, fallback) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback;
}

function fmt(v) {
  if (v === null || v === undefined) return "—";
  const a = Math.abs(v);
  if (a !== 0 && (a < 0.01 || a >= 1e5)) return v.toExponential(2);
  return String(Number(v.toPrecision(6)));
}

/**
 * The chart's data, x ascending (uPlot's order): [xs, ys, best?]. points: [{x, y}]; x may be a string (a
 * category, placed at its index among the sorted categories). line: [{x, y}] on the same xs (best so far).
 */
export function series(points, line = null) {
  const categories = [...new Set(points.filter((p) => typeof p.x === "string").map((p) => p.x))].sort();
  const xOf = (x) => (typeof x === "string" ? categories.indexOf(x) : x);
  const bestAt = new Map((line || []).map((p) => [xOf(p.x), p.y]));
  const sorted = points.map((p) => ({ x: xOf(p.x), y: p.y })).sort((a, b) => a.x - b.x);
  const data = [sorted.map((p) => p.x), sorted.map((p) => p.y)];
  if (line) data.push(sorted.map((p) => bestAt.get(p.x) ?? null));
  return { data, categories };
}

/**
 * A figure holding one chart. points: [{x, y}]; options: {title, xLabel, yLabel, line: [{x, y}] drawn as a
 * step line (best so far), logX, integerX (ticks on whole numbers only: trial numbers)}. The chart is made once the figure is in the page (it needs its width) and
 * destroyed when the figure leaves it.
 */
export function scatter(points, { title, xLabel, yLabel, line = null, logX = false, integerX = false, caption = "" } = {}) {
  const figure = h("figure.chart", { "aria-label": title, role: "group" });
  if (!points.length) {
    figure.append(h("p.muted.empty-plot", {}, "No measurements yet"), caption ? h("figcaption", {}, caption) : null);
    return figure;
  }
  const { data, categories } = series(points, line);
  const plot = color("--plot", "#0b57d0");
  const best = color("--best", "#b45309");
  const fg = color("--fg", "#1a1a1a");
  const grid = color("--line", "#c8c8c8");
  const axis = (label, values) => ({ label, stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, values });
  const xValues = categories.length
    ? (_u, splits) => splits.map((v) => (Number.isInteger(v) ? categories[v] ?? "" : ""))
    : (_u, splits) => splits.map((v) => fmt(v));
  const options = {
    title,
    width: WIDTH,
    height: HEIGHT,
    scales: {
      x: categories.length
        ? { time: false, range: () => [-0.5, categories.length - 0.5] }
        : { time: false, distr: logX ? 3 : 1 },
      y: { auto: true },
    },
    axes: [
      { ...axis(xLabel, xValues), ...(integerX || categories.length ? { incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] } : {}) },
      axis(yLabel, (_u, splits) => splits.map((v) => fmt(v))),
    ],
    cursor: { drag: { x: true, y: true, uni: 30 }, points: { size: 10 } },
    legend: { show: true, live: true },
    series: [
      { label: xLabel, value: (_u, v) => (v === null ? "—" : categories.length ? categories[v] ?? "—" : fmt(v)) },
      {
        label: yLabel, stroke: plot, fill: undefined, width: 0, paths: () => null,
        points: { show: true, size: 8, fill: plot, stroke: plot }, value: (_u, v) => fmt(v),
      },
      ...(line ? [{ label: "best so far", stroke: best, width: 2, paths: uPlot.paths.stepped({ align: 1 }), points: { show: false }, value: (_u, v) => fmt(v) }] : []),
    ],
  };
  let chart = null;
  const observer = new ResizeObserver(() => {
    if (!figure.isConnected) {
      chart?.destroy();
      chart = null;
      observer.disconnect();
      return;
    }
    const width = Math.max(240, Math.floor(figure.clientWidth));
    if (!chart) {
      chart = new uPlot({ ...options, width }, data, figure);
      figure.__chart = chart; // for tests and debugging: the data, scales and cursor
      if (caption) figure.append(h("figcaption", {}, caption));
      figure.dataset.ready = "true";
    } else if (chart.width !== width) {
      chart.setSize({ width, height: HEIGHT });
    }
  });
  observer.observe(figure);
  return figure;
}
