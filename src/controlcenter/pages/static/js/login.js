"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("login-form");
  const error = document.getElementById("login-error");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    cc.show(error, "");
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    const result = await cc.api("POST", "/api/v1/auth/login", {
      email: form.email.value,
      password: form.password.value,
    });
    button.disabled = false;
    if (result.status === 200) {
      // The server put a path of this site there (pages/return_to.py); nothing else is followed.
      location.assign(form.dataset.next);
      return;
    }
    const messages = {
      401: "Wrong e-mail or password.",
      429: "Too many attempts. Wait a few minutes, then try again.",
    };
    cc.show(error, messages[result.status] || cc.errorText(result));
    form.password.select();
  });
});
