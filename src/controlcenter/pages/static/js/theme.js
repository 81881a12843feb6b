// The page's theme, set before it is drawn (this script blocks in <head>): the reader's choice
// of `Theme`, remembered in this browser, else the system's `prefers-color-scheme`, followed
// as it changes. The stylesheet's dark palette applies under `data-theme="dark"`.
"use strict";

(function () {
  const KEY = "cc.theme";
  const system = window.matchMedia("(prefers-color-scheme: dark)");
  const root = document.documentElement;

  function chosen() {
    const kept = localStorage.getItem(KEY);
    return kept === "light" || kept === "dark" ? kept : system.matches ? "dark" : "light";
  }

  function apply() {
    root.dataset.theme = chosen();
    const button = document.getElementById("theme");
    if (button) {
      const dark = root.dataset.theme === "dark";
      button.setAttribute("aria-pressed", String(dark));
      button.title = dark ? "Dark theme: switch to light" : "Light theme: switch to dark";
    }
  }

  apply();
  system.addEventListener("change", apply);
  document.addEventListener("DOMContentLoaded", () => {
    const button = document.getElementById("theme");
    if (!button) return;
    button.addEventListener("click", () => {
      localStorage.setItem(KEY, root.dataset.theme === "dark" ? "light" : "dark");
      apply();
    });
    apply();
  });
})();
