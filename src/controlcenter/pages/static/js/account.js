// /account: own API tokens, own password, sign out.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const TOKENS_URL = "/api/v1/auth/tokens";
  const pageError = document.getElementById("page-error");
  const tokensBody = document.getElementById("tokens-body");
  const tokensEmpty = document.getElementById("tokens-empty");
  const createForm = document.getElementById("create-token");
  const passwordForm = document.getElementById("change-password");
  const passwordError = document.getElementById("password-error");
  const passwordStatus = document.getElementById("password-status");

  document.getElementById("sign-out").addEventListener("click", () => cc.signOut());

  function tokenRow(token) {
    const revoke = cc.el("button", { type: "button", class: "danger small", text: "Revoke", "aria-label": `Revoke ${token.label || "unlabelled token"}` });
    const tr = cc.el(
      "tr",
      {},
      cc.el("td", { "data-label": "Label", text: token.label || "(no label)" }),
      cc.el("td", { "data-label": "Created", text: cc.date(token.createdAt) }),
      cc.el("td", { "data-label": "Last used", text: token.lastUsedAt ? cc.date(token.lastUsedAt) : "Never" }),
      cc.el("td", {}, revoke)
    );
    revoke.addEventListener("click", async () => {
      if (!confirm(`Revoke ${token.label || "this token"}? Anything using it stops working.`)) return;
      const result = await cc.api("DELETE", `${TOKENS_URL}/${encodeURIComponent(token.id)}`);
      if (result.status !== 200 && result.status !== 204) return cc.show(pageError, "The token was not revoked: " + cc.errorText(result));
      tr.remove();
      tokensEmpty.hidden = tokensBody.children.length > 0;
    });
    return tr;
  }

  async function loadTokens() {
    const result = await cc.api("GET", TOKENS_URL);
    if (result.status !== 200) return cc.show(pageError, "Your tokens could not be loaded: " + cc.errorText(result));
    tokensBody.replaceChildren(...result.data.tokens.map(tokenRow));
    tokensEmpty.hidden = result.data.tokens.length > 0;
  }

  cc.oneTimeSecrets(document);

  createForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    cc.show(pageError, "");
    const result = await cc.api("POST", TOKENS_URL, { label: createForm.label.value.trim() });
    if (result.status !== 201 && result.status !== 200) return cc.show(pageError, "The token was not created: " + cc.problemText(result, "The label"));
    cc.showSecret("new-token", result.data.secret);
    createForm.reset();
    tokensBody.prepend(tokenRow(result.data.token));
    tokensEmpty.hidden = true;
  });

  passwordForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    cc.show(passwordError, "");
    cc.clearFieldErrors(passwordForm);
    passwordStatus.textContent = "";
    const result = await cc.api("POST", "/api/v1/auth/password", {
      currentPassword: passwordForm.currentPassword.value,
      newPassword: passwordForm.newPassword.value,
    });
    if (result.status === 200 || result.status === 204) {
      passwordForm.reset();
      passwordStatus.textContent = "Password changed";
      return;
    }
    // Each message beside the field it concerns (`details` name it); anything else above Save.
    const first = cc.showFieldErrors(result.data, (field) => passwordForm.elements[field]);
    if (first) first.focus();
    else cc.show(passwordError, cc.errorText(result));
  });

  loadTokens();
});
