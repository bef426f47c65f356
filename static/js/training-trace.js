// Training on a gold trace (apps/recruitment, training.html): the canvas's green follows the
// known signal; "Start" plays it once while the slider is sampled at the question's recording
// rate; at the end the samples go into the form as {"times": [...], "values": [...]} and the
// server scores them against the truth (kappa_SDA).
(() => {
  "use strict";
  const form = document.querySelector("[data-training-trace]");
  if (!form) return;
  const config = JSON.parse(document.getElementById("training-trace-config").textContent);
  const canvas = document.querySelector("[data-training-stimulus]");
  const slider = form.querySelector("[data-training-slider]");
  const start = form.querySelector("[data-training-start]");
  const submit = form.querySelector("[data-training-submit]");
  const answer = form.querySelector("input[name=answer]");
  const context = canvas.getContext("2d");
  const signal = config.signal;
  const duration = (signal.length - 1) / config.rate_hz;

  const draw = (seconds) => {
    const x = Math.min(seconds * config.rate_hz, signal.length - 1);
    const i = Math.floor(x);
    const j = Math.min(i + 1, signal.length - 1);
    const value = signal[i] + (signal[j] - signal[i]) * (x - i);
    context.fillStyle = `rgb(0, ${Math.round(40 + 215 * value)}, 0)`;
    context.fillRect(0, 0, canvas.width, canvas.height);
  };

  draw(0);
  start.addEventListener("click", () => {
    start.disabled = true;
    const times = [];
    const values = [];
    const began = performance.now();
    let timer = 0;
    const sample = () => {
      const seconds = Math.min((performance.now() - began) / 1000, duration);
      const rounded = Number(seconds.toFixed(3));
      if (!times.length || rounded > times[times.length - 1]) {
        times.push(rounded);
        values.push(Number(slider.value));
      }
      draw(seconds);
      if (seconds >= duration) {
        clearInterval(timer);
        answer.value = JSON.stringify({ times, values });
        submit.disabled = false;
        submit.focus();
      }
    };
    timer = setInterval(sample, 1000 / config.recording_rate_hz);
    sample();
  });
})();
