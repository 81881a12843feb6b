// /setup: the onboarding record and the brokerage name, loaded and saved whole.
"use strict";

document.addEventListener("DOMContentLoaded", async () => {
  const form = document.getElementById("setup-form");
  const formError = document.getElementById("form-error");
  const status = document.getElementById("setup-status");
  const lists = Array.from(form.querySelectorAll("ul.entries"));

  function addEntry(list, value) {
    const name = list.dataset.name;
    const index = list.children.length + 1;
    const input = cc.el("input", { type: "text", name, "aria-label": `${capitalise(list.dataset.item)} ${index}` });
    input.value = value || "";
    const remove = cc.el("button", { type: "button", class: "secondary small", text: "Remove", "aria-label": `Remove ${list.dataset.item} ${index}` });
    const item = cc.el("li", {}, input, remove);
    remove.addEventListener("click", () => {
      item.remove();
      if (!list.children.length) addEntry(list, "");
      renumber(list);
    });
    list.append(item);
    return input;
  }

  function renumber(list) {
    Array.from(list.children).forEach((item, i) => {
      item.querySelector("input").setAttribute("aria-label", `${capitalise(list.dataset.item)} ${i + 1}`);
      item.querySelector("button").setAttribute("aria-label", `Remove ${list.dataset.item} ${i + 1}`);
    });
  }

  function capitalise(text) {
    return text.charAt(0).toUpperCase() + text.slice(1);
  }

  for (const button of form.querySelectorAll(".add-entry")) {
    button.addEventListener("click", () => {
      const list = form.querySelector(`ul.entries[data-name="${button.dataset.list}"]`);
      addEntry(list, "").focus();
    });
  }

  function fill(record, brokerage) {
    for (const list of lists) {
      list.replaceChildren();
      let values = [];
      try {
        values = JSON.parse(record?.[list.dataset.name] || "[]");
      } catch (err) {}
      for (const value of Array.isArray(values) ? values : []) addEntry(list, String(value));
      if (!list.children.length) addEntry(list, "");
    }
    for (const control of form.querySelectorAll("input[id^=f-], select[id^=f-]")) {
      const value = control.name === "brokerageName" ? brokerage : record?.[control.name];
      control.value = value === true ? "true" : value === false ? "false" : value ?? "";
    }
  }

  function collect() {
    const body = {};
    for (const control of form.querySelectorAll("input[id^=f-]")) body[control.name] = control.value;
    for (const control of form.querySelectorAll("select[id^=f-]")) {
      if (control.value) body[control.name] = control.value === "true";
    }
    for (const list of lists) {
      body[list.dataset.name] = Array.from(list.querySelectorAll("input"))
        .map((input) => input.value.trim())
        .filter(Boolean);
    }
    // An empty brokerage name would not clear it: leave it out.
    if (!body.brokerageName) delete body.brokerageName;
    return body;
  }

  function clearErrors() {
    cc.show(formError, "");
    cc.clearFieldErrors(form);
  }

  const [onboarding, me] = await Promise.all([
    cc.api("GET", "/api/v1/onboarding"),
    cc.api("GET", "/api/v1/auth/me"),
  ]);
  if (onboarding.status !== 200 || me.status !== 200) {
    // Left disabled: saving a form that lacks the saved answers would overwrite them.
    cc.show(formError, "Your answers could not be loaded: " + cc.errorText(onboarding.status !== 200 ? onboarding : me));
    return;
  }
  fill(onboarding.data.onboarding, me.data.user.brokerage || "");
  for (const control of form.elements) control.disabled = false;
  form.removeAttribute("aria-busy");

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors();
    status.textContent = "Saving…";
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    const result = await cc.api("POST", "/api/v1/onboarding", collect());
    button.disabled = false;
    if (result.status === 200) {
      status.textContent = "Saved";
      return;
    }
    status.textContent = "";
    const first = cc.showFieldErrors(
      result.data,
      (field) => form.querySelector(`[id="f-${field}"]`) || form.querySelector(`fieldset[name="${field}"] input`)
    );
    const summary = first ? "Some answers need a change: see the messages beside them." : cc.errorText(result);
    cc.show(formError, summary);
    (first || formError).focus?.();
  });
});
