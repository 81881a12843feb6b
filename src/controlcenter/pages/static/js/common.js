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
  function issuesByField(data) {
    const found = {};
    for (const issue of (data && Array.isArray(data.details) ? data.details : [])) {
      const path = Array.isArray(issue.path) ? issue.path : [];
      const field = String(path[0] ?? "");
      (found[field] = found[field] || []).push(issue);
    }
    return found;
  }

  // A field's name as its form shows it: its label's text, else the field's name in words.
  function labelOf(control, field) {
    const label = control && control.labels && control.labels[0];
    const text = label ? label.textContent.replace(/\s+/g, " ").replace(/\(optional\)|\*/gi, "").trim() : "";
    if (text) return text;
    const spaced = String(field || "This field").replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/[_-]+/g, " ").toLowerCase();
    return (spaced.charAt(0).toUpperCase() + spaced.slice(1)).replace(/\bcrm\b/gi, "CRM").replace(/\bemail\b/gi, "e-mail");
  }

  // One `details` entry as a sentence for a person: the field's name and the rule in words
  // (the API keeps pydantic's wording; the page translates it by the issue's `type`).
  // `control`: the field's control, when the page has one (an empty one, an e-mail one).
  function humanIssue(issue, label, control) {
    const message = String(issue.message || "");
    const number = (message.match(/\d[\d,]*/) || [""])[0];
    const path = Array.isArray(issue.path) ? issue.path : [];
    const where = path.length > 1 && Number.isInteger(path[1]) ? ` (entry ${path[1] + 1})` : "";
    const what = (label || "This field") + where;
    const email = control ? control.type === "email" || /email/i.test(control.name || "") : /email/i.test(String(path[0] || ""));
    const empty = control && typeof control.value === "string" && !control.value.trim();
    switch (issue.type) {
      case "string_too_short":
        if (empty || number === "1") return `${what} cannot be empty.`;
        if (email) return `${what} must be an e-mail address, like name@example.com.`;
        return `${what} needs at least ${number} characters.`;
      case "string_too_long":
        return `${what} can have at most ${number} characters.`;
      case "too_short":
        return `${what} needs at least ${number} entries.`;
      case "too_long":
        return `${what} can have at most ${number} entries.`;
      case "missing":
        return `${what} is required.`;
      case "string_type":
        return `${what} must be text.`;
      case "bool_type":
      case "bool_parsing":
        return `${what} must be yes or no.`;
      case "int_type":
      case "int_parsing":
        return `${what} must be a whole number.`;
      case "list_type":
        return `${what} must be a list.`;
      case "literal_error":
      case "enum":
        return `${what} must be ${message.replace(/^Input should be /, "")}.`;
      case "extra_forbidden":
        return `${what} is not a field of this form.`;
      case "string_nul":
        return `${what} cannot contain NUL characters.`;
      case "string_unicode":
        return `${what} holds characters that are not valid text.`;
      case "location_id":
        return `${what} must be a CRM location id: 1 to 64 letters, digits, "_" or "-".`;
      case "value_error":
        if (email) return `${what} must be an e-mail address, like name@example.com.`;
        break;
      default:
        break;
    }
    const rule = message.replace(/^Value error, /, "").replace(/^String should /, "should ");
    return `${what}: ${rule.charAt(0).toLowerCase() + rule.slice(1)}${/[.!?]$/.test(rule) ? "" : "."}`;
  }

  // The messages of each field (`detailsByField`'s shape), in words, for pages that word their
  // own errors; `controlFor(field)` gives a field's control when the page has one.
  function detailsByField(data, controlFor) {
    const found = {};
    for (const [field, issues] of Object.entries(issuesByField(data))) {
      const control = controlFor ? controlFor(field) : null;
      found[field] = issues.map((issue) => humanIssue(issue, labelOf(control, field), control));
    }
    return found;
  }

  // What went wrong, in words: its `details` when it has any (`label`: the name of the one
  // field of a form that shows one message), else its error.
  function problemText(result, label) {
    const issues = Object.values(issuesByField(result.data)).flat();
    return issues.length ? issues.map((issue) => humanIssue(issue, label || labelOf(null, issue.path && issue.path[0]))).join(" ") : errorText(result);
  }

  // Each `details` message beside its field (the element `error-<field>`), in words, the
  // control marked invalid; returns the first such control, or null when no message named a
  // known field.
  function showFieldErrors(data, controlFor) {
    let first = null;
    for (const [field, messages] of Object.entries(detailsByField(data, controlFor))) {
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

  // A box that scrolls sideways says so above it while it has more than it shows (`root`:
  // where to look; the whole page by default). Its edges' shadows say it too (app.css).
  function scrollHints(root) {
    for (const box of (root || document).querySelectorAll(".table-scroll")) {
      const more = box.scrollWidth > box.clientWidth + 1;
      let hint = box.previousElementSibling;
      if (!hint || !hint.classList.contains("scroll-hint")) {
        if (!more) continue;
        hint = el("p", { class: "scroll-hint", text: "Scroll sideways for more columns →" });
        box.before(hint);
      }
      hint.hidden = !more;
    }
  }
  let resizing = 0;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => scrollHints(), 150);
  });

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

  return { api, toLogin, errorText, show, detailsByField, problemText, humanIssue, scrollHints, showFieldErrors, clearFieldErrors, oneTimeSecrets, showSecret, copyText, date, signOut, el };
})();
