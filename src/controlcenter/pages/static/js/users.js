// /admin/users: user administration (list, create, role, disable, password, CRM location).
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const USERS_URL = "/api/v1/admin/users";
  const isSuper = document.body.dataset.role === "super_admin";
  const selfId = document.body.dataset.userId;
  const body = document.getElementById("users-body");
  const template = document.getElementById("user-row");
  const more = document.getElementById("more-users");
  const pageError = document.getElementById("page-error");
  const notice = document.getElementById("users-status");
  const createForm = document.getElementById("create-user");
  const createError = document.getElementById("create-error");
  const ROLE_NAMES = { user: "Broker", admin: "Administrator", super_admin: "Super administrator" };
  let cursor = null;
  cc.oneTimeSecrets(document);

  // Every action starts by taking away what the last one said went wrong.
  function clearProblems() {
    cc.show(pageError, "");
    cc.show(createError, "");
    cc.clearFieldErrors(document.getElementById("main"));
  }

  function say(text) {
    clearProblems();
    notice.textContent = text;
  }

  function problem(text) {
    notice.textContent = "";
    cc.show(pageError, text);
  }

  const ADMIN_ROLES = new Set(["admin", "super_admin"]);

  function row(user) {
    const tr = template.content.firstElementChild.cloneNode(true);
    tr.dataset.userId = user.id;
    tr.querySelector(".email").textContent = user.email;
    tr.querySelector(".name").textContent = user.name || "—";
    const role = tr.querySelector(".role");
    role.setAttribute("aria-label", `Role of ${user.email}`);
    for (const [value, label] of Object.entries(ROLE_NAMES)) {
      const option = cc.el("option", { value, text: label });
      // Only a super administrator may make or unmake administrators.
      if (!isSuper && value !== "user" && value !== user.role) option.disabled = true;
      role.append(option);
    }
    role.value = user.role;
    if (!isSuper && user.role !== "user") role.disabled = true;
    role.addEventListener("change", async () => {
      clearProblems();
      // Administrators see and change every account: granting that is confirmed first.
      if (ADMIN_ROLES.has(role.value) && !confirm(`Make ${user.email} ${ROLE_NAMES[role.value]}? They can then manage other users.`)) {
        role.value = user.role;
        return;
      }
      const result = await patch(user, { role: role.value }, role, tr.querySelector(".role-error"));
      if (result) say(`${user.email} is now ${ROLE_NAMES[result.role]}.`);
      else role.value = user.role;
    });
    tr.querySelector(".status-cell").textContent = user.disabled ? "Disabled" : "Active";
    const toggle = tr.querySelector(".toggle-disabled");
    toggle.textContent = user.disabled ? "Enable" : "Disable";
    toggle.setAttribute("aria-label", `${user.disabled ? "Enable" : "Disable"} ${user.email}`);
    toggle.addEventListener("click", async () => {
      clearProblems();
      const result = await patch(user, { disabled: !user.disabled });
      if (result) say(`${user.email} is ${result.disabled ? "disabled" : "enabled"}.`);
    });
    const crm = tr.querySelector(".crm");
    crm.value = user.crmLocationId || "";
    crm.setAttribute("aria-label", `CRM location of ${user.email}`);
    const link = tr.querySelector(".link-crm");
    link.setAttribute("aria-label", `Link CRM location of ${user.email}`);
    const crmError = tr.querySelector(".crm-error");
    crmError.id = `crm-error-${user.id}`;
    crm.setAttribute("aria-describedby", crmError.id);
    const roleError = tr.querySelector(".role-error");
    roleError.id = `role-error-${user.id}`;
    role.setAttribute("aria-describedby", roleError.id);
    link.addEventListener("click", async () => {
      clearProblems();
      const result = await patch(user, { crmLocationId: crm.value.trim() || null }, crm, crmError);
      if (result) say(result.crmLocationId ? `${user.email} is linked to ${result.crmLocationId}.` : `${user.email} has no CRM location now.`);
    });
    const reset = tr.querySelector(".reset-password");
    reset.setAttribute("aria-label", `Reset password of ${user.email}`);
    reset.addEventListener("click", async () => {
      clearProblems();
      if (!confirm(`Reset the password of ${user.email}? Their sessions are signed out.`)) return;
      const result = await cc.api("POST", `${USERS_URL}/${encodeURIComponent(user.id)}/password`, {});
      if (result.status !== 200) return problem("The password was not reset: " + cc.problemText(result, "The password"));
      say(`The password of ${user.email} was reset.`);
      cc.showSecret("one-time-password", result.data.password, `New password for ${user.email} (shown once):`);
    });
    const del = tr.querySelector(".delete-user");
    del.setAttribute("aria-label", `Delete ${user.email}`);
    if (user.id === selfId) del.disabled = true;
    del.addEventListener("click", async () => {
      clearProblems();
      if (!confirm(`Delete ${user.email} with their conversations, tokens and setup? This cannot be undone.`)) return;
      const result = await cc.api("DELETE", `${USERS_URL}/${encodeURIComponent(user.id)}`);
      if (result.status !== 200 && result.status !== 204) return problem("The user was not deleted: " + cc.errorText(result));
      tr.remove();
      say(`${user.email} was deleted.`);
    });
    return tr;
  }

  // `control` and `error`: the field the change came from and the message beside it.
  async function patch(user, change, control, error) {
    const result = await cc.api("PATCH", `${USERS_URL}/${encodeURIComponent(user.id)}`, change);
    if (result.status !== 200) {
      const text = `${user.email} was not changed: ` + cc.problemText(result);
      if (error) {
        notice.textContent = "";
        cc.show(error, text);
        control.setAttribute("aria-invalid", "true");
      } else {
        problem(text);
      }
      return null;
    }
    const updated = result.data.user;
    const old = body.querySelector(`tr[data-user-id="${CSS.escape(user.id)}"]`);
    if (old) old.replaceWith(row(updated));
    return updated;
  }

  async function load(next) {
    const url = USERS_URL + "?limit=100" + (next ? "&cursor=" + encodeURIComponent(next) : "");
    const result = await cc.api("GET", url);
    if (result.status !== 200) return problem("The users could not be loaded: " + cc.errorText(result));
    if (!next) body.replaceChildren();
    for (const user of result.data.users) body.append(row(user));
    cc.scrollHints();
    cursor = result.data.nextCursor || null;
    more.hidden = !cursor;
  }

  more.addEventListener("click", () => load(cursor));

  createForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearProblems();
    const payload = { email: createForm.email.value.trim(), role: createForm.role.value };
    if (createForm.name.value.trim()) payload.name = createForm.name.value.trim();
    if (createForm.password.value) payload.password = createForm.password.value;
    const result = await cc.api("POST", USERS_URL, payload);
    if (result.status !== 201 && result.status !== 200) {
      // Each message beside its field; one the answer ties to no field below the form.
      const first = cc.showFieldErrors(result.data, (field) => createForm.elements[field]);
      if (first) first.focus();
      else cc.show(createError, cc.problemText(result));
      return;
    }
    createForm.reset();
    body.prepend(row(result.data.user));
    say(`Created ${result.data.user.email}.`);
    if (result.data.password) {
      cc.showSecret("one-time-password", result.data.password, `Password of ${result.data.user.email} (shown once):`);
    }
  });

  load(null);
});
