/*
 * trace-recorder.js — continuous slider annotation during media playback. No dependencies.
 *
 * Samples a slider at the question's recording rate against the MEDIA clock (currentTime of
 * an <audio>/<video>, or of GreenClock for the calibration canvas), never the wall clock, so a
 * paused or stalled player produces no samples. Samples go to the server in numbered chunks
 * every few seconds, one upload at a time (fetch keepalive, so an upload in flight survives a
 * reload; with the CSRF token); a chunk that failed on the network is re-sent with the same
 * number and content, which the server stores once. On `pagehide` everything not acknowledged
 * goes as one chunk; the server drops samples it already holds. On load the page asks the
 * server where an unfinished recording stopped, redraws the trace stored so far, and seeks
 * there; it asks again when Continue is pressed (the previous page's last chunk may have
 * landed in between) and resumes at exactly the last stored sample. With nothing to resume
 * but a finished trace, it redraws that trace and, if the question allows it, offers to trace
 * the item again as a new recording (the finished one stays). The recording's id is kept
 * in sessionStorage, so a reload before the first chunk has landed continues the same one.
 * Mouse and touch move the range input; arrow keys (anywhere on the page) move it by 1 % of
 * the scale, Page Up/Down by 10 %; Space plays and pauses when allowed.
 *
 * Markup: an element [data-trace-recorder] holding a <script type="application/json"> config
 * (id in data-config), the player (audio/video/canvas.trace-stimulus), input.trace-slider,
 * canvas.trace-plot, and buttons [data-action=play|pause|rewind|finish], [data-role=status],
 * [data-role=clock].
 */
(function () {
  "use strict";

  const CHUNK_EVERY_MS = 3000;

  const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

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
      const ratio = window.devicePixelRatio || 1;
      canvas.width = canvas.clientWidth * ratio;
      canvas.height = canvas.clientHeight * ratio;
      this.draw();
    }

    /** Replace the points with a trace stored before this page (seeks already merged). */
    load(times, values) {
      this.points = times.map((t, i) => ({ t, v: values[i], breakBefore: false }));
      this.draw();
    }

    add(t, v, { breakBefore = false } = {}) {
      this.points.push({ t, v, breakBefore });
      this.draw();
    }

    draw() {
      this.canvas.dataset.points = String(this.points.length); // what is drawn, for tests
      const { width, height } = this.canvas;
      const ctx = this.canvas.getContext("2d");
      const pad = 6 * (window.devicePixelRatio || 1);
      const x = (t) => pad + (t / this.duration) * (width - 2 * pad);
      const y = (v) =>
        height - pad - ((v - this.scaleMin) / (this.scaleMax - this.scaleMin)) * (height - 2 * pad);
      ctx.clearRect(0, 0, width, height);
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
      this.storageKey = `trace-recording:${this.config.assignment}:${this.config.question}`;
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
      let state = null;
      for (let attempt = 1; !state; attempt++) {
        try {
          state = await this._resumeState();
        } catch (error) {
          this._say("Cannot reach the server; trying again…");
          await wait(1000 * Math.min(attempt, 5));
        }
      }
      const earlier = sessionStorage.getItem(this.storageKey);
      if (state.recording) {
        this.recording = state.recording;
        this._resumeFrom(state);
      } else if (state.traced && !earlier) {
        this.recording = crypto.randomUUID(); // for a new trace, if the question allows one
        this.resuming = false;
        this._showTraced(state);
        this._tickClock();
        return;
      } else {
        // An earlier page of this tab may have begun it: its first upload can still land.
        this.recording = earlier || crypto.randomUUID();
        this._say("Press Play, then move the slider as the stimulus changes.");
      }
      this.resuming = Boolean(state.recording || earlier);
      sessionStorage.setItem(this.storageKey, this.recording);
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
      window.addEventListener("pagehide", () => this._sendOnLeave());
      document.addEventListener("visibilitychange", () => {
        if (document.hidden) this.flush();
      });
    }

    /** Continue a stored trace: its last sample's time, value and numbering; redraw it. */
    _resumeFrom(state, { keepSlider = false } = {}) {
      this.nextSequence = state.next_sequence;
      this.lastTime = state.last_time;
      if (!keepSlider) this.slider.value = state.last_value;
      this.media.currentTime = state.last_time;
      this.plot.duration = this.duration;
      this.plot.load(state.times, state.values);
      this._tickClock();
      this.buttons.play.textContent = `Continue from ${state.last_time.toFixed(1)} s`;
      this._say(`Your trace was saved up to ${state.last_time.toFixed(1)} s; continue from there.`);
    }

    /** The item is traced: redraw the trace that counts; offer to trace it again if allowed. */
    _showTraced(state) {
      this.plot.duration = this.duration;
      this.plot.load(state.times, state.values);
      this.root.querySelector("[data-role=next]").hidden = false;
      const saved = "You traced this item: your trace is saved and drawn below.";
      if (this.settings.allow_redo) {
        this.redo = true;
        this.buttons.play.textContent = "Trace again";
        this.buttons.play.disabled = false;
        this._say(`${saved} Trace again to replace it (the earlier trace stays in the history).`);
      } else {
        this._disableControls();
        this._say(`${saved} This question does not allow tracing it again.`);
      }
    }

    async play() {
      if (this.failed || this.finished || this.starting) return;
      if (this.redo) {
        this.redo = false;
        sessionStorage.setItem(this.storageKey, this.recording);
        this.plot.load([], []);
      }
      this.plot.duration = this.duration;
      this.slider.focus();
      if (this.resuming) {
        this.starting = true;
        const shown = this.slider.value;
        try {
          const state = await this._resumeState();
          const newer = this.lastTime === null || state.last_time > this.lastTime;
          if (state.recording === this.recording && newer) {
            this._resumeFrom(state, { keepSlider: this.slider.value !== shown }); // moved meanwhile
          }
        } catch (error) {
          // Offline: continue from what this page was told; the server drops any overlap.
        } finally {
          this.starting = false;
        }
        this.resuming = false;
        if (this.lastTime !== null) this._event("resume", this.lastTime);
        this.root.dataset.resumedAt = String(this.lastTime ?? 0);
      }
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
        await wait(1000);
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
    flush() {
      this._freeze();
      return this._drain();
    }

    _freeze() {
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
    }

    /**
     * The page is going away: send everything not acknowledged yet as ONE chunk, numbered
     * above the pending ones, so that no other upload of this page can overtake it. An upload
     * still in flight (keepalive too) may land before or after it: the server drops what is
     * already stored.
     */
    _sendOnLeave() {
      this._freeze();
      if (!this.pending.length || this.failed || this.finished) return;
      const merged = { times: [], values: [], events: [] };
      this.pending.forEach((chunk) => {
        const offset = merged.times.length;
        chunk.events.forEach((e) => merged.events.push({ ...e, index: e.index + offset }));
        merged.times.push(...chunk.times);
        merged.values.push(...chunk.values);
      });
      const chunk = { ...this.pending[0], ...merged, sequence: this.nextSequence++ };
      this._post(this.config.api.chunks, chunk, true).catch(() => {});
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
          response = await this._post(this.config.api.chunks, this.pending[0], true);
        } catch (error) {
          this._say("Connection lost — your samples are kept and will be sent again.");
          return;
        }
        if (response.ok) {
          this.pending.shift();
          this.root.dataset.savedChunks = String(Number(this.root.dataset.savedChunks || 0) + 1);
        } else if (response.status === 400) {
          const body = await this._errors(response);
          if (!("sequence" in body)) return this._fail(body);
          let resynced;
          try {
            resynced = await this._resync(this.pending[0]);
          } catch (error) {
            return; // offline: the next flush tries again
          }
          if (!resynced) return this._fail(body);
        } else if (response.status === 403) {
          this._fail(await this._errors(response));
        } else {
          return; // a server hiccup: the next flush sends the same chunk again
        }
      }
    }

    /**
     * After a chunk numbering conflict (e.g. the previous page's last chunk, sent on pagehide,
     * arrived after this page asked where to resume): number what is pending from the
     * server's next number on. The server drops the samples it already holds. Returns whether
     * that changed anything (else the conflict is not one of numbering).
     */
    async _resync(chunk) {
      const state = await this._resumeState();
      if (state.recording !== this.recording || state.next_sequence <= chunk.sequence) return false;
      this.pending.forEach((pending, i) => (pending.sequence = state.next_sequence + i));
      this.nextSequence = state.next_sequence + this.pending.length;
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
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      return response.json();
    }

    /** Record the trace as the answer; retried on network and server errors (idempotent). */
    async finish() {
      const elapsed = Math.round(performance.now() - this.startedAt);
      const body = { recording: this.recording, time_spent_ms: elapsed };
      let response = null;
      for (let attempt = 0; attempt < 4; attempt++) {
        if (attempt) await wait(1000 * attempt);
        try {
          response = await this._post(this.config.api.finish, body, false);
        } catch (error) {
          continue;
        }
        if (response.ok || response.status < 500) break;
      }
      if (!response || !response.ok) return this._fail(await this._errors(response));
      this.finished = true;
      sessionStorage.removeItem(this.storageKey);
      this._disableControls();
      this.root.classList.add("trace-recorder--done");
      this._say("Trace saved. Thank you!");
      this._countDone();
      const next = this.root.querySelector("[data-role=next]");
      next.hidden = false;
      next.focus();
    }

    /** Show the saved trace in the page's progress bar (the count the server gave for after
     * this item is traced: one more, unless the item was traced before and is redone). */
    _countDone() {
      const box = document.querySelector("[data-role=progress][data-done-after]");
      if (!box) return;
      const bar = box.querySelector("progress");
      const done = Number(box.dataset.doneAfter);
      const total = Number(bar.max);
      bar.value = done;
      const percent = total ? ` (${Math.round((100 * done) / total)}%)` : "";
      box.querySelector(".progress__text").textContent = `${done} of ${total} done${percent}`;
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
      sessionStorage.removeItem(this.storageKey); // a reload starts afresh if the server has none
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
