// /admin/checklist: each integration's state from the saved settings (not set / set), then
// from its test (working / failing with the remote answer); the brokers without a CRM location
// and the onboarding tags, which the chat and the onboarding need.
"use strict";

document.addEventListener("DOMContentLoaded", async () => {
  const table = document.getElementById("integrations");
  const pageError = document.getElementById("checklist-error");
  const rows = Array.from(table.querySelectorAll("tr[data-integration]"));

  function setState(el, kind, text) {
    el.dataset.state = kind;
    el.textContent = text;
  }

  // What is saved now: the settings, and whether an MCP server is in use (a stored, enabled
  // server, or the mcpServerUrl setting). Read again before a failed test is shown, so a
  // setting cleared in another tab is said as not set, not as failing.
  async function saved() {
    const loaded = await cc.api("GET", "/api/v1/admin/settings");
    if (loaded.status !== 200) {
      cc.show(pageError, "The settings could not be loaded: " + cc.errorText(loaded));
      return { settings: {}, mcp: false };
    }
    const settings = loaded.data.settings;
    if (settings.mcpServerUrl) return { settings, mcp: true };
    const servers = await cc.api("GET", "/api/v1/admin/mcp-servers");
    return { settings, mcp: servers.status === 200 && servers.data.servers.some((server) => server.enabled) };
  }

  // The row's state while nothing is tested: not set (every missing setting named), MCP not
  // configured (it is optional), or null when everything it needs is there.
  function notReady(row, now) {
    if (row.dataset.integration === "mcp") return now.mcp ? null : ["optional", "Not configured (optional)"];
    const missing = row.dataset.settings.split(" ").filter((name) => !now.settings[name]);
    return missing.length ? ["unset", "Not set: " + missing.join(", ")] : null;
  }

  async function test(row) {
    const button = row.querySelector("button[data-test]");
    const state = row.querySelector(".check-state");
    button.disabled = true;
    setState(state, "testing", "Testing…");
    const result = await cc.api("POST", `/api/v1/admin/integrations/${row.dataset.integration}/test`);
    const shown = result.status === 200 && !result.data.ok ? notReady(row, await saved()) : null;
    button.disabled = false;
    if (result.status !== 200) {
      setState(state, "failing", "The test could not run: " + cc.errorText(result));
    } else if (result.data.ok) {
      setState(state, "working", "Working: " + result.data.detail);
    } else if (shown) {
      setState(state, ...shown);
    } else {
      setState(state, "failing", "Failing: " + result.data.detail);
    }
  }

  const now = await saved();
  const settings = now.settings;
  const unset = (names) => names.filter((name) => !settings[name]);
  for (const row of rows) {
    setState(row.querySelector(".check-state"), ...(notReady(row, now) || ["set", "Set, not tested yet"]));
    row.querySelector("button[data-test]").addEventListener("click", () => test(row));
  }
  table.removeAttribute("aria-busy");

  const tags = document.getElementById("onboarding-tags");
  const missingTags = unset(tags.dataset.settings.split(" "));
  tags.textContent = missingTags.length
    ? `Onboarding tags not set: ${missingTags.join(", ")} (Settings, CRM tags). Onboarding waits for them.`
    : "Onboarding tags set.";

  // Active brokers without a linked sub-account, over every page of the users list.
  const link = document.getElementById("unlinked-users");
  let count = 0;
  let cursor = null;
  do {
    const query = "?limit=200" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : "");
    const page = await cc.api("GET", "/api/v1/admin/users" + query);
    if (page.status !== 200) {
      link.textContent = "The users could not be counted: " + cc.errorText(page);
      return;
    }
    for (const u of page.data.users) if (u.role === "user" && !u.disabled && !u.crmLocationId) count++;
    cursor = page.data.nextCursor;
  } while (cursor);
  link.textContent = `${count} ${count === 1 ? "user" : "users"} without a CRM location`;
});
