// /admin/settings: only fields the administrator changed are sent, so a masked secret is
// never sent back; Clear removes one setting with DELETE.
"use strict";

document.addEventListener("DOMContentLoaded", async () => {
  const form = document.getElementById("settings-form");
  const formError = document.getElementById("form-error");
  const status = document.getElementById("settings-status");
  const inputs = Array.from(form.querySelectorAll(".setting input"));

  // Typing into a masked secret replaces it whole: a half-edited mask is never a value.
  for (const input of inputs.filter((i) => i.dataset.secret)) {
    input.addEventListener("focus", () => {
      if (input.value && input.value === input.dataset.original) input.select();
    });
  }

  // A value of an unusual shape gets a warning beside it (saving it is still allowed: the
  // API decides). A secret shown masked is not checked: its shape is not visible.
  function warn(input) {
    const warning = document.getElementById("warning-" + input.name);
    const pattern = input.dataset.pattern;
    const masked = input.dataset.secret && input.value === input.dataset.original;
    const odd = pattern && input.value && !masked && !new RegExp(pattern).test(input.value);
    cc.show(warning, odd ? `This does not look like ${input.dataset.shape}.` : "");
  }

  for (const input of inputs) input.addEventListener("input", () => warn(input));

  function fill(settings) {
    for (const input of inputs) {
      input.value = settings[input.name] ?? "";
      input.dataset.original = input.value;
      clearButton(input.name).disabled = !input.value;
      warn(input);
    }
  }

  async function load() {
    const result = await cc.api("GET", "/api/v1/admin/settings");
    if (result.status !== 200) {
      cc.show(formError, "The settings could not be loaded: " + cc.errorText(result));
      return false;
    }
    fill(result.data.settings);
    form.removeAttribute("aria-busy");
    return true;
  }

  function clearButton(name) {
    return form.querySelector(`button[data-clear="${name}"]`);
  }

  function clearErrors() {
    cc.show(formError, "");
    cc.clearFieldErrors(form);
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors();
    const body = {};
    for (const input of inputs) {
      if (input.value !== input.dataset.original && input.value !== "") body[input.name] = input.value;
    }
    if (!Object.keys(body).length) {
      status.textContent = "Nothing changed";
      return;
    }
    status.textContent = "Saving…";
    const result = await cc.api("PUT", "/api/v1/admin/settings", body);
    if (result.status === 200) {
      await load();
      status.textContent = "Saved";
      return;
    }
    status.textContent = "";
    const first = cc.showFieldErrors(result.data, (field) => form.querySelector(`input[name="${field}"]`));
    cc.show(formError, first ? "Some values need a change: see the messages beside them." : cc.errorText(result));
    (first || formError).focus?.();
  });

  for (const button of form.querySelectorAll("button.clear")) {
    button.addEventListener("click", async () => {
      const name = button.dataset.clear;
      const label = document.getElementById("label-" + name).firstChild.textContent.trim();
      if (!confirm(`Clear “${label}”? The stored value is removed.`)) return;
      clearErrors();
      const result = await cc.api("DELETE", "/api/v1/admin/settings/" + encodeURIComponent(name));
      if (result.status !== 200) {
        cc.show(formError, `${label} was not cleared: ` + cc.errorText(result));
        return;
      }
      const input = form.querySelector(`input[name="${name}"]`);
      input.value = "";
      input.dataset.original = "";
      button.disabled = true;
      warn(input);
      status.textContent = `${label} cleared`;
    });
  }

  await load();
});
