// The web terminal into a replica: xterm.js (vendored: ../vendor/xterm-*/, see vendor/README.md) over a
// WebSocket to the shell extension. Binary frames carry the terminal's bytes both ways; text frames are
// controls: {"resize": [cols, rows]} out, {"exit": n} or {"error"} in. xterm.js draws what full-screen
// programs (top, less, vim) send; the fit addon sizes the grid to its box and every change of size goes to
// the replica's pty. A line form below sends a whole command (for a phone, or pasting).

import { FitAddon } from "../../vendor/xterm-addon-fit-0.11.0/addon-fit.mjs";
import { Terminal } from "../../vendor/xterm-6.0.0/xterm.mjs";
import { token } from "../api.js";
import { clear, h, stylesheet } from "../ui.js";

stylesheet("/console/vendor/xterm-6.0.0/xterm.css");

const TERM = "xterm-256color"; // what xterm.js emulates: the replica's programs are told so

export function shellUrl(project, loc, jobId, replica, size = null) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const params = new URLSearchParams({ replica, term: TERM });
  if (size) {
    params.set("cols", String(size.cols));
    params.set("rows", String(size.rows));
  }
  // Browsers cannot set headers on a WebSocket: the token travels as the API's `key` parameter.
  if (token()) params.set("key", token());
  const path = `/trainworks/v1/projects/${encodeURIComponent(project)}/locations/${encodeURIComponent(loc)}` +
    `/customJobs/${encodeURIComponent(jobId)}:shell`;
  return `${scheme}//${location.host}${path}?${params}`;
}

export async function render(main, [project, loc, jobId, replica], ctx) {
  const section = h("section", { id: "terminal-page", "aria-labelledby": "terminal-title" });
  const state = h("p.muted", { id: "terminal-state", role: "status" }, "Connecting…");
  const screen = h("div.xterm-box", { id: "terminal-output", "aria-label": `Terminal of ${replica}` });
  const input = h("input", { id: "terminal-input", type: "text", autocomplete: "off", spellcheck: "false", disabled: true });
  const form = h("form.terminal-input", { "aria-label": "Send a command" },
    h("label", {}, "Command ", input), h("button", { type: "submit" }, "Send"));
  const ctrlC = h("button", { type: "button", disabled: true }, "Send Ctrl-C");
  const ctrlD = h("button", { type: "button", disabled: true }, "Send Ctrl-D");
  clear(main, section);
  section.append(
    h("p", {}, h("a", { href: `#/jobs/${encodeURIComponent(jobId)}?project=${encodeURIComponent(project)}&location=${encodeURIComponent(loc)}` }, `← Custom job ${jobId}`)),
    h("h1", { id: "terminal-title" }, `Terminal: ${replica} of job ${jobId}`),
    state, screen, form, h("div.actions", {}, ctrlC, ctrlD),
    h("p.muted.hint", {}, "Click the terminal to type into it: keys, Ctrl combinations and full-screen programs work as in a local terminal."),
  );

  const styles = getComputedStyle(document.documentElement);
  const term = new Terminal({
    cursorBlink: true,
    scrollback: 5000,
    fontFamily: 'ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace',
    fontSize: 14,
    theme: { background: "#0d1117", foreground: "#e6edf3", cursor: styles.getPropertyValue("--focus").trim() || "#fbbf24" },
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(screen);
  fit.fit();
  screen.__terminal = term; // for tests and debugging: the buffer xterm.js drew
  ctx.onCleanup(() => term.dispose());

  let exited = "";
  const encoder = new TextEncoder();
  const socket = new WebSocket(shellUrl(project, loc, jobId, replica, { cols: term.cols, rows: term.rows }));
  socket.binaryType = "arraybuffer";
  ctx.onCleanup(() => socket.close());
  const send = (data) => {
    if (socket.readyState === WebSocket.OPEN) socket.send(encoder.encode(data));
  };
  const sendSize = () => {
    if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ resize: [term.cols, term.rows] }));
  };

  term.onData(send);
  term.onBinary((data) => {
    if (socket.readyState === WebSocket.OPEN) socket.send(Uint8Array.from(data, (c) => c.charCodeAt(0)));
  });
  term.onResize(sendSize);
  const resizer = new ResizeObserver(() => fit.fit());
  resizer.observe(screen);
  ctx.onCleanup(() => resizer.disconnect());

  socket.addEventListener("open", () => {
    state.textContent = `Connected to ${replica}.`;
    section.dataset.connected = "true";
    for (const el of [input, ctrlC, ctrlD]) el.disabled = false;
    sendSize();
    term.focus();
  });
  socket.addEventListener("message", (event) => {
    if (typeof event.data === "string") {
      // Text frames are controls: {"exit": status} last, {"error": "..."} for a refused control.
      let control = {};
      try {
        control = JSON.parse(event.data);
      } catch {
        control = {};
      }
      if ("exit" in control) {
        exited = `The shell exited with status ${control.exit}.`;
        state.textContent = exited;
      } else if (control.error) {
        state.textContent = `The terminal refused a control: ${control.error}`;
      }
      return;
    }
    term.write(new Uint8Array(event.data));
  });
  socket.addEventListener("close", (event) => {
    section.dataset.connected = "false";
    const why = event.reason ? `: ${event.reason}` : "";
    state.textContent = `${exited ? exited + " " : ""}Disconnected${why} (code ${event.code}).`;
    for (const el of [input, ctrlC, ctrlD]) el.disabled = true;
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    send(`${input.value}\r`);
    input.value = "";
  });
  ctrlC.addEventListener("click", () => send("\x03"));
  ctrlD.addEventListener("click", () => send("\x04"));
}
