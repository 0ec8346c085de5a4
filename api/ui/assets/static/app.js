// The console's one script: relative times that stay fresh, and a confirmation before every
// action. Everything works without it but the confirmation (the server still demands the
// session's CSRF token on every action).
"use strict";

function ago(ms) {
  let d = Math.abs(ms) / 1000;
  const future = ms < 0;
  if (d < 1) return "just now";
  let s;
  if (d < 60) s = Math.floor(d) + "s";
  else if (d < 3600) s = Math.floor(d / 60) + "m";
  else if (d < 48 * 3600) {
    const h = Math.floor(d / 3600), m = Math.floor(d / 60) % 60;
    s = (m !== 0 && h < 10) ? h + "h" + m + "m" : h + "h";
  } else s = Math.floor(d / 86400) + "d";
  return future ? "in " + s : s + " ago";
}

// The page's times were rendered against the server's clock; keep them relative to it by the
// time elapsed in the browser since, so a skewed laptop clock does not skew them.
const renderedAt = Date.now();
let serverNow = null;

function refreshTimes() {
  if (serverNow === null) return;
  const now = serverNow + (Date.now() - renderedAt);
  for (const el of document.querySelectorAll("time.rel[datetime]")) {
    const t = Date.parse(el.getAttribute("datetime"));
    if (!isNaN(t)) el.textContent = ago(now - t);
  }
}

function setupConfirm() {
  const dlg = document.getElementById("confirm");
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (ev) => {
      if (form.dataset.confirmed === "yes") return;
      ev.preventDefault();
      let text = form.dataset.confirm;
      const step = form.querySelector("select[name=fromStep]");
      if (step) text += " Step: " + step.value + ".";
      if (!dlg || typeof dlg.showModal !== "function") {
        if (window.confirm(text)) { form.dataset.confirmed = "yes"; form.submit(); }
        return;
      }
      document.getElementById("confirm-title").textContent = form.dataset.title || "Are you sure?";
      document.getElementById("confirm-text").textContent = text;
      dlg.returnValue = "";
      dlg.onclose = () => {
        if (dlg.returnValue === "yes") { form.dataset.confirmed = "yes"; form.submit(); }
      };
      dlg.showModal();
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const clock = document.querySelector(".top .clock");
  if (clock) {
    const t = Date.parse(clock.textContent.trim().replace(" ", "T"));
    if (!isNaN(t)) serverNow = t;
  }
  setupConfirm();
  setInterval(refreshTimes, 15000);
});
