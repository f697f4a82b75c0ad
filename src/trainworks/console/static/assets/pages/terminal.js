// The web terminal into a replica: a WebSocket to the shell extension (binary frames carry the terminal's
// bytes both ways; text frames are controls: {"resize": [cols, rows]} out, {"exit": n} or {"error"} in). A minimal terminal: output in a
// <pre> with escape sequences removed, and an input line sent on Enter.

import { token } from "../api.js";
import { clear, h } from "../ui.js";

const MAX_CHARS = 200_000;
// CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), and two-byte escapes: colours, titles, cursor moves.
const ESCAPES = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78DEHMc]/g;

/** Terminal output as plain text: escapes removed, CR LF as LF, backspaces applied. */
export function plain(previous, chunk) {
  let text = previous + chunk.replace(ESCAPES, "").replace(/\r\n/g, "\n").replace(/\r(?!$)/g, "\n").replace(/\r$/, "");
  while (/[^\n]\x08/.test(text)) text = text.replace(/[^\n]\x08/, "");
  text = text.replace(/[\x00-\x08\x0b-\x1f\x7f]/g, "");
  return text.length > MAX_CHARS ? text.slice(text.length - MAX_CHARS) : text;
}

export function shellUrl(project, loc, jobId, replica) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const params = new URLSearchParams({ replica });
  // Browsers cannot set headers on a WebSocket: the token travels as the API's `key` parameter.
  if (token()) params.set("key", token());
  const path = `/trainworks/v1/projects/${encodeURIComponent(project)}/locations/${encodeURIComponent(loc)}` +
    `/customJobs/${encodeURIComponent(jobId)}:shell`;
  return `${scheme}//${location.host}${path}?${params}`;
}

export async function render(main, [project, loc, jobId, replica], ctx) {
  const section = h("section", { id: "terminal-page", "aria-labelledby": "terminal-title" });
  const state = h("p.muted", { id: "terminal-state", role: "status" }, "Connecting…");
  const screen = h("pre.terminal", { id: "terminal-output", role: "log", tabindex: "0", "aria-label": `Terminal output of ${replica}` });
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
  );

  let text = "";
  let exited = "";
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  const socket = new WebSocket(shellUrl(project, loc, jobId, replica));
  socket.binaryType = "arraybuffer";
  ctx.onCleanup(() => socket.close());
  const send = (data) => {
    if (socket.readyState === WebSocket.OPEN) socket.send(encoder.encode(data));
  };

  socket.addEventListener("open", () => {
    state.textContent = `Connected to ${replica}.`;
    section.dataset.connected = "true";
    for (const el of [input, ctrlC, ctrlD]) el.disabled = false;
    socket.send(JSON.stringify({ resize: [120, 32] }));
    input.focus();
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
    text = plain(text, decoder.decode(event.data, { stream: true }));
    screen.textContent = text;
    screen.scrollTop = screen.scrollHeight;
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
