// /admin/mcp: the MCP servers beside mcpServerUrl (list, add, change, remove, check).
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const URL_ = "/api/v1/admin/mcp-servers";
  const body = document.getElementById("servers-body");
  const pageError = document.getElementById("page-error");
  const notice = document.getElementById("mcp-status");
  const form = document.getElementById("server-form");
  const title = document.getElementById("form-title");
  const cancel = document.getElementById("cancel-edit");
  const fields = {
    name: document.getElementById("mcp-name"),
    url: document.getElementById("mcp-url"),
    bearerToken: document.getElementById("mcp-token"),
    headers: document.getElementById("mcp-headers"),
    oauthClientId: document.getElementById("mcp-oauth-client-id"),
    oauthClientSecret: document.getElementById("mcp-oauth-client-secret"),
    oauthIssuer: document.getElementById("mcp-oauth-issuer"),
    enabled: document.getElementById("mcp-enabled"),
  };
  let servers = [];
  let states = {};
  let editing = null; // the server being changed, or null when adding

  function headersText(headers) {
    return Object.entries(headers || {}).map(([name, value]) => `${name}: ${value}`).join("\n");
  }

  function parseHeaders(text) {
    const headers = {};
    for (const line of text.split("\n")) {
      if (!line.trim()) continue;
      const at = line.indexOf(":");
      if (at < 1) return null;
      headers[line.slice(0, at).trim()] = line.slice(at + 1).trim();
    }
    return headers;
  }

  function stateText(name) {
    const state = states[name];
    if (!state) return "—";
    if (!state.ok) return `${state.state}: ${state.detail}`;
    return state.warning ? `${state.state} (warning: ${state.warning})` : state.state;
  }

  function render() {
    body.replaceChildren();
    // The setting's server is listed by the check under the setting's name; it is not stored here.
    const setting = states.mcpServerUrl;
    if (setting) {
      body.append(cc.el("tr", {},
        cc.el("td", { "data-label": "Name", text: setting.name }),
        cc.el("td", { "data-label": "Address", text: "the setting mcpServerUrl" }),
        cc.el("td", { "data-label": "State", text: stateText(setting.name) }),
        cc.el("td", { "data-label": "Tools", text: String(setting.toolCount) }),
        cc.el("td", { "data-label": "Actions" })));
    }
    for (const server of servers) {
      const edit = cc.el("button", { type: "button", class: "secondary small", text: "Edit", "aria-label": `Edit ${server.name}` });
      edit.addEventListener("click", () => startEdit(server));
      const remove = cc.el("button", { type: "button", class: "danger small", text: "Delete", "aria-label": `Delete ${server.name}` });
      remove.addEventListener("click", () => removeServer(server));
      const state = server.enabled ? stateText(server.name) : "disabled";
      const count = states[server.name] ? String(states[server.name].toolCount) : "—";
      body.append(cc.el("tr", { "data-server": server.name },
        cc.el("td", { "data-label": "Name", text: server.name }),
        cc.el("td", { "data-label": "Address", text: server.url }),
        cc.el("td", { "data-label": "State", text: state }),
        cc.el("td", { "data-label": "Tools", text: count }),
        cc.el("td", { "data-label": "Actions" }, cc.el("div", { class: "actions" }, edit, remove))));
    }
    cc.scrollHints();
  }

  async function load() {
    const result = await cc.api("GET", URL_);
    if (result.status !== 200) return cc.show(pageError, cc.errorText(result));
    servers = result.data.servers;
    render();
  }

  async function check() {
    notice.textContent = "Checking the servers…";
    const result = await cc.api("GET", URL_ + "/status");
    if (result.status !== 200) {
      notice.textContent = "";
      return cc.show(pageError, cc.errorText(result));
    }
    states = {};
    for (const state of result.data.servers) states[state.name] = state;
    render();
    const checked = result.data.servers.length;
    notice.textContent = checked === 0 ? "No servers to check yet: add one below." : `Checked ${checked} ${checked === 1 ? "server" : "servers"}.`;
  }

  function startEdit(server) {
    editing = server;
    title.textContent = `Change ${server.name}`;
    fields.name.value = server.name;
    fields.url.value = server.url;
    fields.bearerToken.value = server.bearerToken;
    fields.headers.value = headersText(server.headers);
    fields.oauthClientId.value = server.oauthClientId;
    fields.oauthClientSecret.value = server.oauthClientSecret;
    fields.oauthIssuer.value = server.oauthIssuer;
    fields.enabled.checked = server.enabled;
    cancel.hidden = false;
    fields.name.focus();
  }

  function reset() {
    editing = null;
    title.textContent = "Add a server";
    form.reset();
    cancel.hidden = true;
    cc.clearFieldErrors(form);
  }

  async function removeServer(server) {
    if (!confirm(`Delete the MCP server ${server.name}?`)) return;
    const result = await cc.api("DELETE", `${URL_}/${encodeURIComponent(server.id)}`);
    if (result.status !== 200) return cc.show(pageError, cc.errorText(result));
    notice.textContent = `${server.name} deleted.`;
    if (editing && editing.id === server.id) reset();
    await load();
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    cc.clearFieldErrors(form);
    cc.show(pageError, "");
    const headers = parseHeaders(fields.headers.value);
    if (headers === null) {
      cc.show(document.getElementById("error-headers"), "Write one Name: value a line.");
      fields.headers.setAttribute("aria-invalid", "true");
      return fields.headers.focus();
    }
    const sent = {
      name: fields.name.value.trim(),
      url: fields.url.value.trim(),
      bearerToken: fields.bearerToken.value.trim(),
      headers,
      oauthClientId: fields.oauthClientId.value.trim(),
      oauthClientSecret: fields.oauthClientSecret.value.trim(),
      oauthIssuer: fields.oauthIssuer.value.trim(),
      enabled: fields.enabled.checked,
    };
    const result = editing
      ? await cc.api("PATCH", `${URL_}/${encodeURIComponent(editing.id)}`, sent)
      : await cc.api("POST", URL_, sent);
    if (result.status !== 200 && result.status !== 201) {
      const first = cc.showFieldErrors(result.data, (field) => fields[field]);
      if (first) return first.focus();
      return cc.show(pageError, cc.problemText(result));
    }
    notice.textContent = `${result.data.server.name} saved.`;
    reset();
    await load();
  });

  cancel.addEventListener("click", reset);
  document.getElementById("check-servers").addEventListener("click", check);
  load().then(check);
});
