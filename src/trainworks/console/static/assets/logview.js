// A job's log, windowed: only the rows on screen are in the DOM (a pool of fixed-height rows, recycled as
// the view scrolls), over a buffer of at most MAX_ROWS lines loaded a page at a time from the logs
// extension (`limit`, `after`, `before`, `tail` cursors by insertId) as the view nears either end of the
// buffer. Following a running job streams its lines (`follow=true`) and appends them once per animation
// frame; the view sticks to the bottom only while the user is there. Filters (task, severity, text) are
// the endpoint's own, so a filtered view pages through the whole log too.
//
// Why no virtual-scrolling library: with a fixed row height the rows on screen are two divisions, and the
// hard parts here (a buffer paged in both directions by cursor, trimmed at the far end, the scroll position
// kept when lines are prepended, sticking to a live bottom) are outside what such libraries do. The
// maintained one (@tanstack/virtual-core) also needs a bundler (its ES build reads process.env), and
// recomputes every row's position whenever the row count changes: each frame of a live log.

import { streamNdjson } from "./api.js";
import { h } from "./ui.js";

export const ROW_HEIGHT = 20; // px, also set as --log-row on the view: CSS and arithmetic agree
const PAGE = 500; // lines asked per page
const MAX_ROWS = 50_000; // lines kept in the buffer (50,000 rows: a 1,000,000 px tall scroll area)
const OVERSCAN = 8; // rows drawn beyond each edge of the view
const LOAD_MARGIN = 300; // rows from an edge of the buffer at which the next page is asked
const MAX_TEXT = 4000; // characters of a line drawn (the download has every character)
const REFRESH_MS = 2000; // at the bottom of a running job's log, not following: how often to look for more
// Severity in words as well as in colour: the colour is not the only sign.
const SHORT = {
  DEFAULT: "", DEBUG: "DEBUG", INFO: "INFO", NOTICE: "NOTE", WARNING: "WARN", ERROR: "ERROR", CRITICAL: "CRIT",
  ALERT: "ALERT", EMERGENCY: "EMERG",
};


export class LogView {
  /** base: the job's /trainworks/v1 path; onState(text, loaded): what the view is doing (for a status
   * line: it changes only when the activity does) and how many lines it holds. */
  constructor(base, { onState = () => {} } = {}) {
    this.base = base;
    this.onState = onState;
    this.filters = { task: "", severity: "", q: "" };
    this.follow = false;
    this.ended = false; // the job has ended: its log is complete
    this.rows = [];
    this.pending = []; // live lines waiting for the next frame
    this.topDone = false; // the buffer starts where the log does
    this.bottomDone = false; // the buffer ends where the log does now
    this.bottomAt = 0; // when bottomDone was learnt
    this.loading = { up: false, down: false };
    this.live = null; // the AbortController of the follow stream
    this.generation = 0; // bumped on every reset: answers to older requests are dropped
    this.frame = 0;
    this.failed = "";
    this.paused = false; // following stopped while the user reads elsewhere: it resumes at the bottom

    this.sizer = h("div.logview-sizer");
    this.window = h("div.logview-rows");
    this.sizer.append(this.window);
    this.element = h("div.logview", {
      id: "logs", role: "log", tabindex: "0", "aria-label": "Job logs", "aria-live": "off",
      style: `--log-row: ${ROW_HEIGHT}px`,
    }, this.sizer);
    this.pool = [];
    this.element.addEventListener("scroll", () => this.schedule(), { passive: true });
    this.element.addEventListener("keydown", (event) => this.key(event));
    this.resizer = new ResizeObserver(() => this.schedule());
    this.resizer.observe(this.element);
  }

  close() {
    this.generation += 1;
    this.stopLive();
    this.resizer.disconnect();
    cancelAnimationFrame(this.frame);
  }

  // ------------------------------------------------------------------ what the user asks
  setFilters(filters) {
    this.filters = { ...this.filters, ...filters };
    this.start();
  }

  setFollow(follow) {
    this.follow = follow;
    if (follow) this.jumpEnd();
    else this.stopLive();
  }

  /** The job's state, learnt again (the page polls it): at the bottom of a running job's log, look for
   * more; follow it while it runs. */
  setEnded(ended) {
    if (ended && !this.ended && !this.live) this.bottomDone = false; // its last lines may have come since
    this.ended = this.ended || ended;
    this.report();
    this.schedule();
  }

  /** The first view: the end of a running job's log when following, else its start. */
  start() {
    if (this.follow && !this.ended) this.jumpEnd();
    else this.jumpTop();
  }

  key(event) {
    if (event.altKey || event.metaKey || event.shiftKey) return;
    if (event.key === "Home") {
      event.preventDefault();
      this.jumpTop();
    } else if (event.key === "End") {
      event.preventDefault();
      this.jumpEnd();
    }
  }

  reset() {
    this.generation += 1;
    this.stopLive();
    this.rows = [];
    this.pending = [];
    this.topDone = this.bottomDone = false;
    this.loading = { up: false, down: false };
    this.failed = "";
    this.paused = false;
  }

  /** The log's first page, at the top. */
  async jumpTop() {
    this.reset();
    this.topDone = true;
    this.element.scrollTop = 0;
    this.draw();
    await this.loadAfter();
  }

  /** The log's last page, at the bottom; then, following a running job, what it writes next. */
  async jumpEnd() {
    this.reset();
    this.bottomDone = true;
    this.draw();
    if (this.follow && !this.ended) {
      this.startLive({ tail: PAGE });
      return;
    }
    const generation = this.generation;
    this.loading.down = true;
    this.report();
    try {
      const page = await this.page({ tail: PAGE });
      if (generation !== this.generation) return;
      this.rows = page;
      this.topDone = page.length < PAGE;
      this.bottomAt = performance.now();
      this.draw();
      this.element.scrollTop = this.element.scrollHeight;
    } catch (error) {
      this.fail(error, generation);
    } finally {
      if (generation === this.generation) this.loading.down = false;
      this.report();
    }
  }

  // ------------------------------------------------------------------ loading
  query(params) {
    const search = new URLSearchParams();
    for (const [key, value] of Object.entries({ ...this.filters, ...params })) {
      if (value !== undefined && value !== null && value !== "") search.set(key, String(value));
    }
    return `${this.base}/logs?${search}`;
  }

  async page(params) {
    let lines = [];
    await streamNdjson(this.query(params), (batch) => { lines = lines.concat(batch); });
    return lines;
  }

  fail(error, generation) {
    if (generation !== this.generation || error.name === "AbortError") return;
    this.failed = `Logs failed: ${error.message}`;
    this.report();
  }

  /** The page after the buffer's last line (the first page when empty). */
  async loadAfter() {
    if (this.bottomDone || this.loading.down || this.live) return;
    const generation = this.generation;
    this.loading.down = true;
    this.report();
    try {
      const last = this.rows[this.rows.length - 1];
      const page = await this.page(last ? { after: last.insertId, limit: PAGE } : { limit: PAGE });
      if (generation !== this.generation) return;
      this.append(page, false);
      if (page.length < PAGE) {
        this.bottomDone = true;
        this.bottomAt = performance.now();
      }
    } catch (error) {
      this.fail(error, generation);
    } finally {
      if (generation === this.generation) this.loading.down = false;
      this.report();
      this.schedule();
    }
  }

  /** The page before the buffer's first line; the view stays on the lines it showed. */
  async loadBefore() {
    if (this.topDone || this.loading.up || !this.rows.length) return;
    const generation = this.generation;
    this.loading.up = true;
    this.report();
    try {
      const page = await this.page({ before: this.rows[0].insertId, limit: PAGE });
      if (generation !== this.generation) return;
      if (page.length < PAGE) this.topDone = true;
      this.rows = page.concat(this.rows);
      if (this.rows.length > MAX_ROWS) {
        this.rows.length = MAX_ROWS; // the far end goes: it is paged in again when scrolled to
        this.bottomDone = false;
        this.stopLive();
      }
      this.sizer.style.height = `${this.rows.length * ROW_HEIGHT}px`;
      this.element.scrollTop += page.length * ROW_HEIGHT;
      this.draw();
    } catch (error) {
      this.fail(error, generation);
    } finally {
      if (generation === this.generation) this.loading.up = false;
      this.report();
      this.schedule();
    }
  }

  /** Follow: the job's lines as it writes them, from `params` (a tail, or after the buffer's last line). */
  async startLive(params) {
    this.stopLive();
    this.paused = false;
    const generation = this.generation;
    const controller = new AbortController();
    this.live = controller;
    this.report();
    try {
      await streamNdjson(this.query({ ...params, follow: "true" }), (lines) => {
        if (generation !== this.generation || this.live !== controller) return;
        for (const line of lines) this.pending.push(line);
        this.schedule();
      }, controller.signal);
      if (this.live === controller) {
        this.live = null;
        this.ended = true; // the stream ends with the job
        this.bottomDone = true;
        this.bottomAt = performance.now();
      }
    } catch (error) {
      if (this.live === controller) this.live = null;
      this.fail(error, generation);
    }
    this.report();
    this.schedule();
  }

  stopLive() {
    if (!this.live) return;
    const controller = this.live;
    this.live = null;
    controller.abort();
    this.pending = [];
    this.bottomDone = false; // what the stream had not brought yet comes a page at a time
    this.report();
  }

  /** Lines after the buffer's end. Over MAX_ROWS the oldest go; but lines that come live while the user
   * reads elsewhere in the buffer pause following instead (it resumes at the bottom). The view sticks to
   * the bottom only when following and there. */
  append(lines, live) {
    if (!lines.length) return;
    const stick = live && this.atBottom();
    let added = lines;
    const room = MAX_ROWS - this.rows.length;
    if (live && !stick && added.length > room) {
      added = added.slice(0, Math.max(room, 0));
      this.stopLive();
      this.paused = true;
    }
    this.rows = this.rows.length ? this.rows.concat(added) : added;
    const over = this.rows.length - MAX_ROWS;
    if (over > 0) {
      this.rows.splice(0, over);
      this.topDone = false;
      if (!stick) this.element.scrollTop -= over * ROW_HEIGHT; // the lines on screen stay there
    }
    this.sizer.style.height = `${this.rows.length * ROW_HEIGHT}px`;
    if (stick) this.element.scrollTop = this.element.scrollHeight;
  }

  atBottom() {
    const el = this.element;
    return el.scrollTop + el.clientHeight >= el.scrollHeight - ROW_HEIGHT;
  }

  // ------------------------------------------------------------------ drawing
  schedule() {
    if (!this.frame) this.frame = requestAnimationFrame(() => this.tick());
  }

  tick() {
    this.frame = 0;
    if (this.pending.length) {
      const lines = this.pending;
      this.pending = [];
      this.append(lines, true);
      this.report();
    }
    this.draw();
    this.more();
  }

  /** Asks for the next page when the view is near an edge of the buffer that is not the log's; at the
   * bottom of a running job's log, following, streams what comes next (a backlog too: faster than pages). */
  more() {
    if (this.failed) return; // until the user asks again (a filter, Start, End): no loop of failures
    const first = Math.floor(this.element.scrollTop / ROW_HEIGHT);
    const last = first + Math.ceil(this.element.clientHeight / ROW_HEIGHT);
    if (first < LOAD_MARGIN && !this.topDone) this.loadBefore();
    if (this.live || last <= this.rows.length - LOAD_MARGIN) return;
    if (this.follow && !this.ended && this.atBottom() && !this.loading.down) {
      const lastRow = this.rows[this.rows.length - 1];
      this.startLive(lastRow ? { after: lastRow.insertId } : { tail: PAGE });
      return;
    }
    if (this.bottomDone && !this.ended && performance.now() - this.bottomAt > REFRESH_MS) this.bottomDone = false;
    if (!this.bottomDone) this.loadAfter();
  }

  /** The rows on screen, from the pool. */
  draw() {
    const el = this.element;
    this.sizer.style.height = `${this.rows.length * ROW_HEIGHT}px`;
    const first = Math.max(0, Math.floor(el.scrollTop / ROW_HEIGHT) - OVERSCAN);
    const count = Math.ceil(el.clientHeight / ROW_HEIGHT) + 2 * OVERSCAN;
    while (this.pool.length < count) {
      const row = h("div.log-row", {}, h("span.log-time"), h("span.log-task"), h("span.log-sev"), h("span.log-text"));
      row.hidden = true;
      this.pool.push(row);
      this.window.append(row);
    }
    this.window.style.transform = `translateY(${first * ROW_HEIGHT}px)`;
    for (let i = 0; i < this.pool.length; i++) {
      const row = this.pool[i];
      const entry = i < count ? this.rows[first + i] : undefined;
      if (row.entry === entry) continue;
      row.entry = entry;
      if (!entry) {
        row.hidden = true;
        delete row.dataset.task;
        delete row.dataset.severity;
        continue;
      }
      row.hidden = false;
      row.dataset.task = entry.task;
      row.dataset.severity = entry.severity || "DEFAULT";
      const [time, task, severity, text] = row.children;
      time.textContent = String(entry.time || "").slice(11, 23); // HH:MM:SS.mmm, UTC
      time.title = entry.time || "";
      task.textContent = entry.task;
      severity.textContent = SHORT[entry.severity] ?? entry.severity ?? "";
      const line = String(entry.text ?? "");
      text.textContent = line.length > MAX_TEXT ? `${line.slice(0, MAX_TEXT)}…` : line;
    }
  }

  /** Tells onState what the view is doing. */
  report() {
    let text;
    if (this.failed) text = this.failed;
    else if (this.live) text = this.rows.length || this.pending.length ? "Following the job's output." : "Following: no lines yet.";
    else if (this.loading.down || this.loading.up) text = "Loading…";
    else if (this.paused && this.follow) text = "Following paused while you read: it resumes at the end.";
    else if (!this.rows.length && this.bottomDone) text = this.ended ? "No log lines." : "No log lines yet.";
    else if (this.bottomDone && this.ended) text = "End of logs.";
    else if (this.bottomDone) text = "End of what the job has written so far.";
    else text = "";
    this.onState(text, this.rows.length);
  }
}
