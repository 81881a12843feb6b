// /activity and /admin/activity: the ledger of the assistant's CRM writes, newest first,
// searched and paged; the broker's own page has `Undo` on each entry that can be undone.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const admin = document.body.dataset.activityScope === "admin";
  const URL = admin ? "/api/v1/admin/activity" : "/api/v1/control-center/activity";
  const list = document.getElementById("entries");
  const empty = document.getElementById("entries-empty");
  const older = document.getElementById("older-entries");
  const search = document.getElementById("activity-search");
  const pageError = document.getElementById("page-error");
  const status = document.getElementById("activity-status");
  const STATES = { done: "Done", undone: "Undone", failed: "Failed", unknown: "Outcome unknown" };
  let cursor = null;
  let query = "";

  function stateLabel(entry) {
    if (entry.state === "done" && !entry.undoable && !entry.title.startsWith("Undo: ")) return "Done · cannot be undone";
    return STATES[entry.state] || entry.state;
  }

  function item(entry) {
    const time = cc.el("time", { datetime: entry.createdAt, text: cc.date(entry.createdAt) });
    const badge = cc.el("span", { class: "activity-state " + entry.state, text: stateLabel(entry) });
    const head = cc.el("div", { class: "activity-head" }, cc.el("span", { class: "activity-title", text: entry.title }), badge);
    const meta = cc.el("div", { class: "activity-meta" }, time);
    if (admin) meta.append(cc.el("span", { text: "User " + entry.userId }));
    else meta.append(cc.el("a", { href: "/chat/" + encodeURIComponent(entry.conversationId), text: "Open conversation" }));
    meta.append(cc.el("span", { class: "muted", text: entry.tool }));
    const li = cc.el("li", { class: "activity-entry " + entry.state, "data-entry-id": entry.id },
      head, cc.el("p", { class: "activity-summary", text: entry.summary }), meta);
    if (!admin && entry.undoable) {
      const undo = cc.el("button", { type: "button", class: "secondary small", text: "Undo", "aria-describedby": "summary-" + entry.id });
      li.querySelector(".activity-summary").id = "summary-" + entry.id;
      undo.addEventListener("click", () => runUndo(entry, undo));
      meta.append(undo);
    }
    return li;
  }

  async function runUndo(entry, button) {
    button.disabled = true;
    cc.show(pageError, "");
    status.textContent = "";
    const result = await cc.api("POST", URL + "/" + encodeURIComponent(entry.id) + "/undo");
    if (result.status === 200) {
      status.textContent = "Undone: " + result.data.entry.summary;
      await load(null);
      return;
    }
    button.disabled = false;
    const why = {
      "Changed since": "The record changed since the assistant's change, so it was left as it is.",
      "Already undone": "This change was already undone.",
      "Cannot be undone": "This change cannot be undone.",
    }[cc.errorText(result)];
    cc.show(pageError, "Not undone: " + (why || cc.errorText(result)));
  }

  async function load(after) {
    list.setAttribute("aria-busy", "true");
    const params = new URLSearchParams({ limit: "50" });
    if (after) params.set("cursor", after);
    if (query) params.set("q", query);
    const result = await cc.api("GET", URL + "?" + params);
    list.removeAttribute("aria-busy");
    if (result.status !== 200) {
      cc.show(pageError, "The activity could not be loaded: " + cc.errorText(result));
      return;
    }
    const items = result.data.entries.map(item);
    if (after) list.append(...items);
    else list.replaceChildren(...items);
    cursor = result.data.nextCursor;
    older.hidden = !cursor;
    empty.hidden = list.children.length > 0;
  }

  let typing = 0;
  search.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => {
      query = search.value.trim();
      load(null);
    }, 250);
  });
  older.addEventListener("click", () => load(cursor));
  load(null);
});
