// Shared by every page: calls to the JSON API and small helpers for showing messages.
"use strict";

window.cc = (function () {
  // Calls the API with the session cookie. Resolves to {status, data}; never throws for an
  // HTTP error, so each page decides what to show. A lost session sends the user to sign in.
  async function api(method, url, body) {
    const options = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(url, options);
    } catch (err) {
      return { status: 0, data: { error: "The service cannot be reached. Check your connection and try again." } };
    }
    if (response.status === 401 && !url.endsWith("/auth/login") && !url.endsWith("/auth/password")) {
      toLogin();
    }
    let data = null;
    try {
      data = await response.json();
    } catch (err) {
      data = { error: `The service answered ${response.status} without details.` };
    }
    return { status: response.status, data };
  }

  function toLogin() {
    const next = location.pathname + location.search;
    location.assign("/login?next=" + encodeURIComponent(next));
  }

  function errorText(result) {
    if (result.data && typeof result.data.error === "string") return result.data.error;
    return `Something went wrong (HTTP ${result.status}).`;
  }

  function show(el, text) {
    el.textContent = text;
    el.hidden = !text;
  }

  // `details` entries ({path, message, type}) by their first path element (the field name).
  function detailsByField(data) {
    const found = {};
    for (const issue of (data && Array.isArray(data.details) ? data.details : [])) {
      const path = Array.isArray(issue.path) ? issue.path : [];
      const field = String(path[0] ?? "");
      const where = path.length > 1 ? ` (entry ${Number(path[1]) + 1})` : "";
      (found[field] = found[field] || []).push(`${issue.message || "Invalid value"}${where}`);
    }
    return found;
  }

  // What went wrong in the answer's own words: its `details` messages when it has any, else
  // its error (for a form that shows one message, not one per field).
  function problemText(result) {
    const details = Object.values(detailsByField(result.data)).flat();
    return details.length ? details.join(" ") : errorText(result);
  }

  // Each `details` message beside its field (the element `error-<field>`), the control marked
  // invalid; returns the first such control, or null when no message named a known field.
  function showFieldErrors(data, controlFor) {
    let first = null;
    for (const [field, messages] of Object.entries(detailsByField(data))) {
      const error = document.getElementById("error-" + field);
      const control = controlFor(field);
      if (!error || !control) continue;
      show(error, messages.join(" "));
      control.setAttribute("aria-invalid", "true");
      first = first || control;
    }
    return first;
  }

  function clearFieldErrors(form) {
    for (const p of form.querySelectorAll(".field-error")) show(p, "");
    for (const c of form.querySelectorAll("[aria-invalid]")) c.removeAttribute("aria-invalid");
  }

  function date(value) {
    if (!value) return "—";
    const moment = new Date(value);
    return isNaN(moment) ? String(value) : moment.toLocaleString();
  }

  // The Copy and Dismiss buttons of a secret shown once (`data-copy`: the element whose text
  // is copied; `data-dismiss`: the box to hide). The secret stays until dismissed.
  function oneTimeSecrets(root) {
    for (const button of root.querySelectorAll("button.copy-secret")) {
      button.addEventListener("click", async () => {
        const value = document.getElementById(button.dataset.copy);
        try {
          await navigator.clipboard.writeText(value.textContent);
          button.textContent = "Copied";
        } catch (err) {
          // No clipboard (an insecure origin): select it for the user's own copy.
          getSelection().selectAllChildren(value);
          button.textContent = "Selected: press Ctrl+C";
        }
      });
    }
    for (const button of root.querySelectorAll("button.dismiss-secret")) {
      button.addEventListener("click", () => {
        document.getElementById(button.dataset.dismiss).hidden = true;
      });
    }
  }

  // A secret in its box (`_secret_once.html`'s `id`): the value, the words above it when
  // given, and a Copy button that reads Copy again, whatever the last secret's said.
  function showSecret(id, value, label) {
    const box = document.getElementById(id);
    if (label !== undefined) document.getElementById(id + "-label").textContent = label;
    document.getElementById(id + "-value").textContent = value;
    for (const copy of box.querySelectorAll("button.copy-secret")) copy.textContent = "Copy";
    box.hidden = false;
  }

  // A Copy button's click: `text` to the clipboard, the button saying whether it went there
  // for two seconds before it reads `label` again.
  async function copyText(button, text, label) {
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = "Copied";
    } catch (err) {
      button.textContent = "Not copied";
    }
    setTimeout(() => (button.textContent = label), 2000);
  }

  async function signOut() {
    await api("POST", "/api/v1/auth/logout");
    location.assign("/login");
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) if (child != null) node.append(child);
    return node;
  }

  return { api, toLogin, errorText, show, detailsByField, problemText, showFieldErrors, clearFieldErrors, oneTimeSecrets, showSecret, copyText, date, signOut, el };
})();
