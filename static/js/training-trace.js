// Training on a gold trace (apps/recruitment, training.html). The stimulus is the item's own
// audio or video, or, for an item without media, a canvas whose green follows the known
// signal (config.signal). "Start" plays it once while the slider is sampled at the question's
// recording rate against the stimulus's clock; at the end the samples go into the form as
// {"times": [...], "values": [...]} and the server scores them against the truth (kappa_SDA).
(() => {
  "use strict";
  const form = document.querySelector("[data-training-trace]");
  if (!form) return;
  const config = JSON.parse(document.getElementById("training-trace-config").textContent);
  const stimulus = document.querySelector("[data-training-stimulus]");
  const slider = form.querySelector("[data-training-slider]");
  const start = form.querySelector("[data-training-start]");
  const submit = form.querySelector("[data-training-submit]");
  const answer = form.querySelector("input[name=answer]");

  /** The green screen as a clock: seconds since Start, painted on each sample. */
  const greenClock = (canvas, signal, rateHz) => {
    const context = canvas.getContext("2d");
    const duration = (signal.length - 1) / rateHz;
    let began = null;
    let last = 0;
    const draw = (seconds) => {
      const x = Math.min(seconds * rateHz, signal.length - 1);
      const i = Math.floor(x);
      const j = Math.min(i + 1, signal.length - 1);
      const value = signal[i] + (signal[j] - signal[i]) * (x - i);
      context.fillStyle = `rgb(0, ${Math.round(40 + 215 * value)}, 0)`;
      context.fillRect(0, 0, canvas.width, canvas.height);
    };
    draw(0);
    return {
      play: () => {
        began = performance.now();
      },
      now: () => {
        last = began === null ? 0 : Math.min((performance.now() - began) / 1000, duration);
        draw(last);
        return last;
      },
      ended: () => last >= duration, // as of the latest now(): the last sample is at the end
    };
  };

  /** The item's own audio or video: its media clock, never the wall clock. */
  const mediaClock = (media) => ({
    play: () => media.play(),
    now: () => media.currentTime,
    ended: () => media.ended,
  });

  const clock = config.signal
    ? greenClock(stimulus, config.signal, config.rate_hz)
    : mediaClock(stimulus);

  start.addEventListener("click", () => {
    start.disabled = true;
    const times = [];
    const values = [];
    let timer = 0;
    const sample = () => {
      const rounded = Number(clock.now().toFixed(3));
      if (!times.length || rounded > times[times.length - 1]) {
        times.push(rounded);
        values.push(Number(slider.value));
      }
      if (clock.ended()) {
        clearInterval(timer);
        answer.value = JSON.stringify({ times, values });
        submit.disabled = false;
        submit.focus();
      }
    };
    Promise.resolve(clock.play()).then(
      () => {
        timer = setInterval(sample, 1000 / config.recording_rate_hz);
        sample();
      },
      () => {
        start.disabled = false; // the browser refused to play: let the participant try again
      }
    );
  });
})();
