/*
 * trace-recorder.js — continuous slider annotation during media playback. No dependencies.
 *
 * Samples a slider at the question's recording rate against the MEDIA clock (currentTime of
 * an <audio>/<video>, or of GreenClock for the calibration canvas), never the wall clock, so a
 * paused or stalled player produces no samples. Samples go to the server in numbered chunks
 * every few seconds and on `pagehide` (fetch keepalive, with the CSRF token); a chunk that
 * failed on the network is re-sent with the same number and content, which the server stores
 * once. On load the page asks the server where an unfinished recording stopped, seeks there
 * and continues it. Mouse and touch move the range input; arrow keys (anywhere on the page)
 * move it by 1 % of the scale, Page Up/Down by 10 %; Space plays and pauses when allowed.
 *
 * Markup: an element [data-trace-recorder] holding a <script type="application/json"> config
 * (id in data-config), the player (audio/video/canvas.trace-stimulus), input.trace-slider,
 * canvas.trace-plot, and buttons [data-action=play|pause|rewind|finish], [data-role=status],
 * [data-role=clock].
 */
(function () {
  "use strict";

  const CHUNK_EVERY_MS = 3000;

  /** A media-like clock that paints a canvas whose green intensity follows a known signal. */
  class GreenClock extends EventTarget {
    constructor(canvas, values, rateHz) {
      super();
      this.canvas = canvas;
      this.values = values;
      this.rateHz = rateHz;
      this.duration = (values.length - 1) / rateHz;
      this.paused = true;
      this.ended = false;
      this._time = 0;
      this._startedAt = 0;
      this._draw();
    }

    get currentTime() {
      if (this.paused) return this._time;
      return Math.min(this.duration, (performance.now() - this._startedAt) / 1000);
    }

    set currentTime(t) {
      this._time = Math.max(0, Math.min(this.duration, t));
      this._startedAt = performance.now() - this._time * 1000;
      this.ended = this._time >= this.duration;
      this._draw();
      this.dispatchEvent(new Event("seeked"));
    }

    play() {
      if (this.ended || !this.paused) return Promise.resolve();
      this._startedAt = performance.now() - this._time * 1000;
      this.paused = false;
      this.dispatchEvent(new Event("play"));
      const frame = () => {
        if (this.paused) return;
        this._draw();
        if (this.currentTime >= this.duration) {
          this._time = this.duration;
          this.paused = true;
          this.ended = true;
          this._draw();
          this.dispatchEvent(new Event("ended"));
          return;
        }
        requestAnimationFrame(frame);
      };
      requestAnimationFrame(frame);
      return Promise.resolve();
    }

    pause() {
      if (this.paused) return;
      this._time = this.currentTime;
      this.paused = true;
      this.dispatchEvent(new Event("pause"));
    }

    /** Truth at time t by linear interpolation between the signal's samples. */
    valueAt(t) {
      const x = t * this.rateHz;
      const i = Math.min(this.values.length - 1, Math.floor(x));
      const j = Math.min(this.values.length - 1, i + 1);
      return this.values[i] + (this.values[j] - this.values[i]) * (x - i);
    }

    _draw() {
      const ctx = this.canvas.getContext("2d");
      const level = Math.round(255 * Math.max(0, Math.min(1, this.valueAt(this.currentTime))));
      ctx.fillStyle = `rgb(0, ${level}, 0)`;
      ctx.fillRect(0, 0, this.canvas.width, this.canvas.height);
    }
  }

  /** The trace drawn live under the player. */
  class TracePlot {
    constructor(canvas, { scaleMin, scaleMax }) {
      this.canvas = canvas;
      this.scaleMin = scaleMin;
      this.scaleMax = scaleMax;
      this.duration = 1;
      this.points = [];
      this.savedUntil = 0; // seconds stored before this page (a resumed trace), shaded
      const ratio = window.devicePixelRatio || 1;
      canvas.width = canvas.clientWidth * ratio;
      canvas.height = canvas.clientHeight * ratio;
      this.draw();
    }

    add(t, v, { breakBefore = false } = {}) {
      this.points.push({ t, v, breakBefore });
      this.draw();
    }

    draw() {
      const { width, height } = this.canvas;
      const ctx = this.canvas.getContext("2d");
      const pad = 6 * (window.devicePixelRatio || 1);
      const x = (t) => pad + (t / this.duration) * (width - 2 * pad);
      const y = (v) =>
        height - pad - ((v - this.scaleMin) / (this.scaleMax - this.scaleMin)) * (height - 2 * pad);
      ctx.clearRect(0, 0, width, height);
      if (this.savedUntil > 0) {
        ctx.fillStyle = "#e3f0f8";
        ctx.fillRect(pad, pad, x(this.savedUntil) - pad, height - 2 * pad);
      }
      ctx.strokeStyle = "#d0d7de";
      ctx.lineWidth = 1;
      ctx.strokeRect(pad, pad, width - 2 * pad, height - 2 * pad);
      ctx.strokeStyle = "#0072b2";
      ctx.lineWidth = 2 * (window.devicePixelRatio || 1);
      ctx.beginPath();
      this.points.forEach((p, i) => {
        if (i === 0 || p.breakBefore) ctx.moveTo(x(p.t), y(p.v));
        else ctx.lineTo(x(p.t), y(p.v));
      });
      ctx.stroke();
    }
  }

  /** Records one item's trace: sampling, chunked upload, resume and finish. */
  class TraceRecorder {
    constructor(root) {
      this.root = root;
      this.config = JSON.parse(document.getElementById(root.dataset.config).textContent);
      const s = this.config.settings;
      this.settings = s;
      this.slider = root.querySelector(".trace-slider");
      this.status = root.querySelector("[data-role=status]");
      this.clock = root.querySelector("[data-role=clock]");
      this.buttons = {};
      root.querySelectorAll("[data-action]").forEach((b) => (this.buttons[b.dataset.action] = b));
      this.plot = new TracePlot(root.querySelector(".trace-plot"), {
        scaleMin: s.scale_min,
        scaleMax: s.scale_max,
      });
      const canvas = root.querySelector("canvas.trace-stimulus");
      this.media = canvas
        ? new GreenClock(canvas, this.config.gold.values, this.config.gold.rate_hz)
        : root.querySelector("audio, video");
      this.recording = null;
      this.nextSequence = 0;
      this.lastTime = null;
      this.buffer = { times: [], values: [], events: [] };
      this.pending = [];
      this.sending = false;
      this.failed = false;
      this.finished = false;
      this.startedAt = performance.now();
    }

    get duration() {
      return this.config.duration || this.media.duration;
    }

    async init() {
      this._bind();
      this._say("Loading…");
      const state = await this._resumeState();
      if (state.recording) {
        this.recording = state.recording;
        this.nextSequence = state.next_sequence;
        this.lastTime = state.last_time;
        this.slider.value = state.last_value;
        this.media.currentTime = state.last_time;
        this.plot.duration = this.duration;
        this.plot.savedUntil = state.last_time;
        this.plot.draw();
        this._event("resume", state.last_time);
        this.buttons.play.textContent = `Continue from ${state.last_time.toFixed(1)} s`;
        this._say(`Your trace was saved up to ${state.last_time.toFixed(1)} s; continue from there.`);
      } else {
        this.recording = crypto.randomUUID();
        this._say("Press Play, then move the slider as the stimulus changes.");
      }
      this.buttons.play.disabled = false;
      this._tickClock();
    }

    _bind() {
      const ms = 1000 / this.settings.recording_rate_hz;
      setInterval(() => this._sample(), ms);
      setInterval(() => this.flush(), CHUNK_EVERY_MS);
      this.buttons.play.addEventListener("click", () => this.play());
      this.buttons.pause?.addEventListener("click", () => this.media.pause());
      this.buttons.rewind?.addEventListener("click", () => this._rewind());
      this.media.addEventListener("play", () => this._onPlay());
      this.media.addEventListener("pause", () => this._onPause());
      this.media.addEventListener("ended", () => this._onEnded());
      this.media.addEventListener("loadedmetadata", () => (this.plot.duration = this.duration));
      if (this.duration) this.plot.duration = this.duration;
      document.addEventListener("keydown", (e) => this._onKey(e));
      window.addEventListener("pagehide", () => this.flush({ keepalive: true }));
      document.addEventListener("visibilitychange", () => {
        if (document.hidden) this.flush();
      });
    }

    play() {
      if (this.failed || this.finished) return;
      this.plot.duration = this.duration;
      this.slider.focus();
      this.media.play();
    }

    _onPlay() {
      this.buttons.play.disabled = true;
      this.buttons.play.textContent = "Play";
      if (this.buttons.pause) this.buttons.pause.disabled = !this.settings.allow_pause;
      if (this.buttons.rewind) this.buttons.rewind.disabled = false;
      if (this.lastTime !== null) this._event("play", this.media.currentTime);
      this._say("Recording. Move the slider with the mouse, a finger or the arrow keys.");
      this._sample();
    }

    _onPause() {
      if (this.media.ended || this.finished) return;
      this._sample();
      this._event("pause", this.media.currentTime);
      this.buttons.play.disabled = false;
      this.buttons.play.textContent = "Play";
      if (this.buttons.pause) this.buttons.pause.disabled = true;
      this.slider.focus(); // the arrow keys and Space keep working
      this._say("Paused.");
      this.flush();
    }

    async _onEnded() {
      this._sample(this.duration);
      this._say("Saving your trace…");
      await this.flush();
      for (let attempt = 0; attempt < 10 && this.pending.length && !this.failed; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 1000));
        await this._drain();
      }
      if (this.pending.length) {
        this._say("Could not reach the server; reload the page to send the rest of the trace.");
      } else if (!this.failed) {
        await this.finish();
      }
    }

    _rewind() {
      const target = Math.max(0, this.media.currentTime - 5);
      this._sample();
      this.media.currentTime = target;
      this._event("seek", target);
      this.lastTime = target - 1e-6;
      this.seekPending = true;
    }

    _onKey(e) {
      if (e.target.closest("input:not(.trace-slider), textarea, select")) return;
      const step = (this.settings.scale_max - this.settings.scale_min) / 100;
      const moves = { ArrowUp: 1, ArrowRight: 1, ArrowDown: -1, ArrowLeft: -1, PageUp: 10, PageDown: -10 };
      if (e.key in moves && e.target !== this.slider) {
        e.preventDefault();
        const next = Number(this.slider.value) + moves[e.key] * step;
        this.slider.value = Math.max(this.settings.scale_min, Math.min(this.settings.scale_max, next));
      } else if (e.key === " " && !e.target.closest("button, a, select, textarea")) {
        e.preventDefault();
        if (this.media.paused) this.play();
        else if (this.settings.allow_pause) this.media.pause();
      }
    }

    /** Take one sample at the media time, if the media clock moved since the last one. */
    _sample(forceTime) {
      if (this.failed || this.finished) return;
      if (forceTime === undefined && this.media.paused) return;
      const t = forceTime ?? this.media.currentTime;
      if (this.lastTime !== null && t <= this.lastTime) return;
      const v = Number(this.slider.value);
      this.buffer.times.push(t);
      this.buffer.values.push(v);
      this.plot.add(t, v, { breakBefore: Boolean(this.seekPending) });
      this.seekPending = false;
      this.lastTime = t;
      this._tickClock();
    }

    _event(type, time) {
      this.buffer.events.push({ type, index: this.buffer.times.length, time });
    }

    _tickClock() {
      const total = this.duration ? this.duration.toFixed(1) : "?";
      this.clock.textContent = `${(this.lastTime ?? 0).toFixed(1)} s of ${total} s`;
    }

    /** Freeze the buffer into the next numbered chunk and send what is pending. */
    flush({ keepalive = false } = {}) {
      if (this.buffer.times.length) {
        this.pending.push({
          recording: this.recording,
          sequence: this.nextSequence++,
          assignment: this.config.assignment,
          question: this.config.question,
          duration: this.duration,
          ...this.buffer,
        });
        this.buffer = { times: [], values: [], events: [] };
      } else if (this.buffer.events.length && this.pending.length) {
        this.pending[this.pending.length - 1].events.push(...this.buffer.events);
        this.buffer.events = [];
      }
      if (keepalive) {
        this.pending.forEach((chunk) => this._post(this.config.api.chunks, chunk, true));
        return Promise.resolve();
      }
      return this._drain();
    }

    /** Send pending chunks in order, one at a time; concurrent callers share the run. */
    _drain() {
      if (!this.draining) {
        this.draining = this._drainLoop().finally(() => (this.draining = null));
      }
      return this.draining;
    }

    async _drainLoop() {
      while (this.pending.length && !this.failed) {
        let response;
        try {
          response = await this._post(this.config.api.chunks, this.pending[0], false);
        } catch (error) {
          this._say("Connection lost — your samples are kept and will be sent again.");
          return;
        }
        if (response.ok) {
          this.pending.shift();
          this.root.dataset.savedChunks = String(Number(this.root.dataset.savedChunks || 0) + 1);
        } else if (response.status === 400) {
          const body = await this._errors(response);
          if (!("sequence" in body) || !(await this._resync())) this._fail(body);
        } else if (response.status === 403) {
          this._fail(await this._errors(response));
        } else {
          return; // a server hiccup: the next flush sends the same chunk again
        }
      }
    }

    /**
     * After a chunk numbering conflict (e.g. the previous page's last chunk, sent on pagehide,
     * arrived after this page asked where to resume): take the server's numbering, drop the
     * samples it already has, and renumber what is pending. Returns whether anything is left
     * to send in a consistent order.
     */
    async _resync() {
      const state = await this._resumeState();
      if (state.recording !== this.recording) return false;
      const chunks = this.pending.concat([this.buffer]);
      const merged = { times: [], values: [], events: [] };
      chunks.forEach((chunk) => {
        chunk.times.forEach((t, i) => {
          if (t > state.last_time) {
            merged.times.push(t);
            merged.values.push(chunk.values[i]);
          }
        });
        // Player events stay, moved before the first sample (a seek's segment is lost).
        chunk.events.forEach((e) => {
          if (e.type !== "seek") merged.events.push({ ...e, index: 0 });
        });
      });
      this.pending = [];
      this.buffer = merged;
      this.nextSequence = state.next_sequence;
      if (this.buffer.times.length) this.flush();
      return true;
    }

    async _resumeState() {
      const query = new URLSearchParams({
        assignment: this.config.assignment,
        question: this.config.question,
      });
      const response = await fetch(`${this.config.api.resume}?${query}`, {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      return response.json();
    }

    /** Record the trace as the answer; retried on network and server errors (idempotent). */
    async finish() {
      const elapsed = Math.round(performance.now() - this.startedAt);
      const body = { recording: this.recording, time_spent_ms: elapsed };
      let response = null;
      for (let attempt = 0; attempt < 4; attempt++) {
        if (attempt) await new Promise((resolve) => setTimeout(resolve, 1000 * attempt));
        try {
          response = await this._post(this.config.api.finish, body, false);
        } catch (error) {
          continue;
        }
        if (response.ok || response.status < 500) break;
      }
      if (!response || !response.ok) return this._fail(await this._errors(response));
      this.finished = true;
      this._disableControls();
      this.root.classList.add("trace-recorder--done");
      this._say("Trace saved. Thank you!");
      const next = this.root.querySelector("[data-role=next]");
      next.hidden = false;
      next.focus();
    }

    /** The error messages of a refused request, whatever its body. */
    async _errors(response) {
      if (!response) return { detail: ["the server could not be reached."] };
      try {
        return await response.json();
      } catch (error) {
        return { detail: [`HTTP ${response.status}.`] };
      }
    }

    _post(url, body, keepalive) {
      return fetch(url, {
        method: "POST",
        keepalive,
        credentials: "same-origin",
        headers: {
          "Content-Type": "application/json",
          Accept: "application/json",
          "X-CSRFToken": this.config.csrf,
        },
        body: JSON.stringify(body),
      });
    }

    _fail(body) {
      this.failed = true;
      this.media.pause();
      this._disableControls();
      const messages = Object.values(body || {}).flat().join(" ");
      this.root.classList.add("trace-recorder--failed");
      this._say(`The server refused the trace: ${messages} Reload the page to continue.`);
    }

    _disableControls() {
      Object.values(this.buttons).forEach((button) => (button.disabled = true));
      this.slider.disabled = true;
    }

    _say(text) {
      this.status.textContent = text;
    }
  }

  function start() {
    document.querySelectorAll("[data-trace-recorder]").forEach((root) => {
      const recorder = new TraceRecorder(root);
      root.traceRecorder = recorder;
      recorder.init();
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
