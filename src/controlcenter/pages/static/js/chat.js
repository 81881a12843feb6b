// The chat page: the conversation list, one conversation, and the answer as it streams.
// The chat endpoint is a POST, so its event stream is read with fetch, frame by frame.
"use strict";

(function () {
  const CHAT_URL = "/api/v1/control-center/chat";
  const CONVERSATIONS_URL = "/api/v1/control-center/conversations";
  const PROVIDERS_URL = "/api/v1/control-center/providers";
  const TOOLS_URL = "/api/v1/control-center/tools";
  const PROVIDER_LABELS = { provider_a: "Claude", provider_b: "OpenAI" };
  // `follow`: keep the newest text in view, until the reader scrolls up to read back.
  // `conversations`: the list's entries loaded so far (every page), for its date groups.
  const state = {
    conversationId: "",
    running: false,
    follow: true,
    nextCursor: null,
    conversations: [],
    query: "",
    admin: false,
    tools: {}, // tool name -> title
    maxChars: 32000, // the chat's limit on a message, in characters (the page's `data-message-max`)
    providersLoaded: Promise.resolve(), // the Model list's loading (a send waits for it)
  };
  let ui;

  // Chat controls: the Stop button, and resuming a running answer after a
  // reload or a lost connection. The running answer's message id is kept in this tab
  // (sessionStorage) with its conversation, so that a reload finds it and reads its events
  // again from the events endpoint.
  const RUNNING_KEY = "cc.running";
  const controls = {
    messageId: "",
    started(messageId) {
      controls.messageId = messageId;
      sessionStorage.setItem(RUNNING_KEY, JSON.stringify({ messageId, conversationId: state.conversationId }));
      ui.stop.hidden = false;
      ui.stop.disabled = false;
    },
    ended() {
      controls.messageId = "";
      sessionStorage.removeItem(RUNNING_KEY);
      ui.stop.hidden = true;
    },
    async stop() {
      if (!controls.messageId) return;
      ui.stop.disabled = true;
      const result = await cc.api("POST", CHAT_URL + "/" + encodeURIComponent(controls.messageId) + "/stop");
      if (result.status !== 200 && result.status !== 409) {
        cc.show(ui.pageError, "The answer could not be stopped: " + cc.errorText(result));
        ui.stop.disabled = false;
      }
    },
    // The running answer of this conversation kept by an earlier page, if any.
    pending(conversationId) {
      try {
        const kept = JSON.parse(sessionStorage.getItem(RUNNING_KEY) || "null");
        return kept && kept.conversationId === conversationId ? kept.messageId : "";
      } catch (err) {
        return "";
      }
    },
  };

  document.addEventListener("DOMContentLoaded", () => {
    ui = {
      list: document.getElementById("conversation-list"),
      listEmpty: document.getElementById("conversation-list-empty"),
      listToggle: document.getElementById("list-toggle"),
      older: document.getElementById("older"),
      provider: document.getElementById("provider"),
      title: document.getElementById("chat-title"),
      messages: document.getElementById("messages"),
      welcome: document.getElementById("welcome"),
      form: document.getElementById("composer"),
      input: document.getElementById("message"),
      send: document.getElementById("send"),
      del: document.getElementById("delete"),
      dialog: document.getElementById("confirm-delete"),
      pageError: document.getElementById("page-error"),
      stop: document.getElementById("stop"),
      search: document.getElementById("search"),
      rename: document.getElementById("rename"),
      renameForm: document.getElementById("rename-form"),
      renameTitle: document.getElementById("rename-title"),
      renameCancel: document.getElementById("rename-cancel"),
      renameError: document.getElementById("rename-error"),
      notSetUp: document.getElementById("not-set-up"),
      suggestions: document.getElementById("suggestions"),
      composerError: document.getElementById("composer-error"),
      count: document.getElementById("message-count"),
    };
    state.maxChars = Number(document.body.dataset.messageMax) || state.maxChars;
    ui.stop.addEventListener("click", () => controls.stop());
    state.conversationId = document.body.dataset.conversationId || "";
    state.admin = document.body.dataset.admin === "true";
    ui.form.addEventListener("submit", (event) => {
      event.preventDefault();
      send();
    });
    ui.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        send();
      }
    });
    ui.input.addEventListener("input", () => {
      grow(ui.input);
      showCount();
    });
    let searching = 0;
    ui.search.addEventListener("input", () => {
      clearTimeout(searching);
      searching = setTimeout(() => {
        state.query = ui.search.value.trim();
        refreshList();
      }, 250);
    });
    ui.rename.addEventListener("click", () => openRename());
    ui.renameCancel.addEventListener("click", () => closeRename());
    ui.renameForm.addEventListener("submit", (event) => {
      event.preventDefault();
      saveRename();
    });
    ui.renameForm.addEventListener("keydown", (event) => {
      if (event.key === "Escape") closeRename();
    });
    ui.messages.addEventListener("scroll", () => {
      const box = ui.messages;
      state.follow = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
    });
    ui.del.addEventListener("click", () => ui.dialog.showModal());
    ui.dialog.addEventListener("close", () => {
      if (ui.dialog.returnValue === "delete") removeConversation();
    });
    ui.listToggle.addEventListener("click", () => {
      const open = ui.listToggle.getAttribute("aria-expanded") !== "true";
      ui.listToggle.setAttribute("aria-expanded", String(open));
    });
    ui.older.addEventListener("click", () => refreshList(state.nextCursor));
    ui.provider.addEventListener("change", () => localStorage.setItem("cc.provider", ui.provider.value));
    state.providersLoaded = loadProviders();
    refreshList();
    // The titles first: the open conversation's tool cards show them.
    const tools = loadTools();
    if (state.conversationId) tools.then(() => openConversation(state.conversationId));
    ui.input.focus();
  });

  // -- the conversation list -----------------------------------------------------------------

  // The first page of the list, or (with a cursor) the next page added below it; with a
  // search, only the conversations whose title or messages hold it.
  async function refreshList(cursor) {
    const params = new URLSearchParams();
    if (cursor) params.set("cursor", cursor);
    if (state.query) params.set("q", state.query);
    const query = state.query;
    const result = await cc.api("GET", CONVERSATIONS_URL + (params.toString() ? "?" + params : ""));
    if (query !== state.query) return; // a newer search is under way
    if (result.status !== 200) {
      cc.show(ui.pageError, "The conversation list could not be loaded: " + cc.errorText(result));
      return;
    }
    state.conversations = (cursor ? state.conversations : []).concat(result.data.conversations);
    state.nextCursor = result.data.nextCursor || null;
    ui.older.hidden = !state.nextCursor;
    showList();
  }

  // The loaded conversations under their date's heading (newest first, as listed).
  function showList() {
    const groups = [];
    for (const c of state.conversations) {
      const label = dayGroup(c.createdAt);
      if (!groups.length || groups[groups.length - 1].label !== label) groups.push({ label, items: [] });
      // The whole title, wrapped (and as a tooltip): titles that start alike stay apart.
      const link = cc.el("a", { href: "/chat/" + encodeURIComponent(c.id), text: c.title || "Untitled", title: c.title || "Untitled" });
      if (c.id === state.conversationId) link.setAttribute("aria-current", "page");
      groups[groups.length - 1].items.push(cc.el("li", {}, link, timeOf(c.createdAt, true)));
    }
    ui.list.replaceChildren(
      ...groups.flatMap((group) => [cc.el("h2", { class: "list-group", text: group.label }), cc.el("ul", {}, ...group.items)])
    );
    ui.listEmpty.textContent = state.query ? "No conversation matches." : "No conversations yet.";
    ui.listEmpty.hidden = state.conversations.length > 0;
  }

  function startOfDay(moment) {
    return new Date(moment.getFullYear(), moment.getMonth(), moment.getDate()).getTime();
  }

  // Today, Yesterday, Previous 7 days, Previous 30 days, then the month ("October 2026").
  function dayGroup(value) {
    const moment = new Date(value);
    if (isNaN(moment)) return "Earlier";
    const days = Math.round((startOfDay(new Date()) - startOfDay(moment)) / 86400000);
    if (days <= 0) return "Today";
    if (days === 1) return "Yesterday";
    if (days < 7) return "Previous 7 days";
    if (days < 30) return "Previous 30 days";
    return moment.toLocaleDateString(undefined, { month: "long", year: "numeric" });
  }

  // `<time datetime>`: the clock time for today, else the date too (`short`: the date alone).
  function timeOf(value, short) {
    const moment = value ? new Date(value) : new Date();
    const today = startOfDay(moment) === startOfDay(new Date());
    const clock = { hour: "2-digit", minute: "2-digit" };
    const date = { day: "numeric", month: "short" };
    const text = today ? moment.toLocaleTimeString([], clock) : short ? moment.toLocaleDateString([], date) : moment.toLocaleString([], { ...date, ...clock });
    return cc.el("time", { datetime: moment.toISOString(), title: moment.toLocaleString(), text });
  }

  // -- the providers: only those with a key ---------------------------------------------------

  async function loadProviders() {
    const result = await cc.api("GET", PROVIDERS_URL);
    const names = result.status === 200 ? result.data.providers : [];
    ui.provider.replaceChildren(...names.map((name) => cc.el("option", { value: name, text: PROVIDER_LABELS[name] || name })));
    const kept = localStorage.getItem("cc.provider");
    if (names.includes(kept)) ui.provider.value = kept;
    const ready = names.length > 0;
    ui.provider.disabled = !ready;
    ui.provider.hidden = !ready;
    ui.input.disabled = !ready;
    ui.send.disabled = !ready || state.running;
    ui.notSetUp.hidden = ready || result.status !== 200;
    if (result.status !== 200) cc.show(ui.pageError, "The assistant's settings could not be read: " + cc.errorText(result));
  }

  // -- renaming --------------------------------------------------------------------------------

  function openRename() {
    ui.renameTitle.value = ui.title.textContent;
    cc.show(ui.renameError, "");
    ui.title.hidden = ui.rename.hidden = true;
    ui.renameForm.hidden = false;
    ui.renameTitle.focus();
    ui.renameTitle.select();
  }

  function closeRename() {
    ui.renameForm.hidden = true;
    ui.title.hidden = false;
    ui.rename.hidden = !state.conversationId;
    cc.show(ui.renameError, "");
    ui.rename.focus();
  }

  async function saveRename() {
    const url = CONVERSATIONS_URL + "/" + encodeURIComponent(state.conversationId);
    const blank = !ui.renameTitle.value.trim();
    const result = blank ? null : await cc.api("PATCH", url, { title: ui.renameTitle.value });
    if (!result || result.status !== 200) {
      cc.show(ui.renameError, blank ? "The title cannot be empty." : "The title was not saved: " + cc.problemText(result, "The title"));
      ui.renameTitle.setAttribute("aria-invalid", "true");
      ui.renameTitle.focus();
      return;
    }
    ui.renameTitle.removeAttribute("aria-invalid");
    setTitle(result.data.conversation.title);
    closeRename();
    await refreshList();
  }

  // -- one conversation ------------------------------------------------------------------------

  async function openConversation(id) {
    const result = await cc.api("GET", CONVERSATIONS_URL + "/" + encodeURIComponent(id));
    if (result.status === 404) {
      cc.show(ui.pageError, "This conversation does not exist or was deleted. Start a new one below.");
      startNew();
      return;
    }
    if (result.status !== 200) {
      cc.show(ui.pageError, "The conversation could not be loaded: " + cc.errorText(result));
      return;
    }
    const conversation = result.data.conversation;
    setTitle(conversation.title);
    ui.del.hidden = ui.rename.hidden = false;
    ui.welcome.hidden = true;
    for (const message of conversation.messages) {
      if (message.role === "user") addUserMessage(message.content, message.createdAt);
      else renderStoredAnswer(message);
    }
    scrollToEnd(true);
    const running = controls.pending(id);
    if (running && !conversation.messages.some((m) => m.id === running)) await resumeAnswer(running);
    else if (running) controls.ended();
    turnActions();
  }

  // An answer that was running when the page was left: its events again, from the first.
  async function resumeAnswer(messageId) {
    state.running = true;
    ui.send.disabled = true;
    const answer = newAnswer();
    answer.article.setAttribute("aria-busy", "true");
    controls.started(messageId);
    try {
      const finished = await follow(answer, "", messageId, 0);
      if (!finished) cc.show(answer.error, "The answer could not be followed. Reload the page to see what was saved.");
    } finally {
      answerEnded(answer);
    }
  }

  // However an answer ends (done, stopped, failed, cut), the composer is free again.
  function answerEnded(answer) {
    answer.article.removeAttribute("aria-busy");
    state.running = false;
    ui.send.disabled = ui.input.disabled;
    controls.ended();
    turnActions();
    scrollToEnd(false);
  }

  function startNew() {
    state.conversationId = "";
    history.replaceState(null, "", "/chat");
    setTitle("New chat");
    ui.del.hidden = ui.rename.hidden = true;
    ui.messages.replaceChildren(ui.welcome);
    ui.welcome.hidden = false;
  }

  function setTitle(text) {
    ui.title.textContent = text || "Untitled";
    ui.title.title = text || "Untitled"; // the whole title where the heading is cut short
    document.title = `${text || "Chat"} · Control Center`;
  }

  async function removeConversation() {
    const id = state.conversationId;
    const result = await cc.api("DELETE", CONVERSATIONS_URL + "/" + encodeURIComponent(id));
    if (result.status !== 200 && result.status !== 404) {
      cc.show(ui.pageError, "The conversation was not deleted: " + cc.errorText(result));
      return;
    }
    cc.show(ui.pageError, "");
    startNew();
    await refreshList();
    ui.input.focus();
  }

  // -- messages ----------------------------------------------------------------------------------

  function addUserMessage(text, createdAt) {
    const bubble = cc.el("div", { class: "bubble" });
    bubble.textContent = text;
    const meta = cc.el("div", { class: "msg-meta" }, timeOf(createdAt));
    const article = cc.el("article", { class: "msg user", "aria-label": "You" }, bubble, meta);
    ui.messages.append(article);
    return article;
  }

  function newAnswer() {
    const body = cc.el("div", { class: "answer-body" });
    const error = cc.el("div", { class: "alert", role: "alert" });
    error.hidden = true;
    const meta = cc.el("div", { class: "msg-meta" });
    const article = cc.el("article", { class: "msg assistant", "aria-label": "Assistant" }, body, error, meta);
    ui.messages.append(article);
    // `blocks`: the text of each text block, in order (a tool card ends a block).
    const answer = { article, body, error, meta, text: null, textValue: "", blocks: [], content: "", cards: {}, lastId: 0, started: false };
    article.answer = answer;
    return answer;
  }

  // The answer's time and `Copy` (its text blocks, a blank line between two), once complete.
  function answerDone(answer, message) {
    const blocks = answer.blocks.map((block) => block.trim()).filter(Boolean);
    answer.content = blocks.length ? blocks.join("\n\n") : message.content || "";
    const copy = cc.el("button", { type: "button", class: "link-button", text: "Copy" });
    copy.addEventListener("click", () => cc.copyText(copy, answer.content, "Copy"));
    answer.meta.prepend(timeOf(message.createdAt), copy);
    if (message.usage) showUsage(answer, message.usage);
  }

  // A stored answer as it looked live: its `parts` (text blocks and tool calls in the order
  // they happened) when it has them; an older answer without them: its tool calls, then its text.
  function renderStoredAnswer(message) {
    const answer = newAnswer();
    const results = {};
    for (const result of message.toolResults || []) results[result.toolCallId] = result;
    const calls = {};
    for (const call of message.toolCalls || []) calls[call.id] = call;
    const showCall = (call) => {
      toolStarted(answer, call);
      if (results[call.id]) toolFinished(answer, results[call.id]);
      delete calls[call.id];
    };
    const parts = Array.isArray(message.parts) ? message.parts : [];
    for (const part of parts) {
      if (part && part.type === "text" && part.text) {
        answer.text = null; // each stored block is a block of its own, as it was live
        appendText(answer, part.text);
      } else if (part && part.type === "toolCall" && calls[part.toolCallId]) {
        showCall(calls[part.toolCallId]);
      }
    }
    for (const call of message.toolCalls || []) if (calls[call.id]) showCall(call);
    if (!parts.length && message.content) appendText(answer, message.content);
    if (message.interrupted) cc.show(answer.error, "This answer was interrupted before it was complete.");
    answerDone(answer, message);
  }

  // The token counts help an administrator, not a broker.
  function showUsage(answer, usage) {
    if (!state.admin) return;
    const text = `${usage.inputTokens} tokens in · ${usage.outputTokens} out`;
    answer.meta.append(cc.el("span", { class: "usage muted", text }));
  }

  // `Regenerate` on the last answer, `Edit` on the last user message, while nothing runs.
  function turnActions() {
    for (const old of ui.messages.querySelectorAll(".turn-action")) old.remove();
    if (state.running || !state.conversationId) return;
    const articles = [...ui.messages.querySelectorAll(".msg")];
    const lastUser = articles.filter((a) => a.classList.contains("user")).pop();
    if (!lastUser) return;
    const after = articles.slice(articles.indexOf(lastUser) + 1);
    const lastAnswer = after.filter((a) => a.classList.contains("assistant")).pop();
    if (lastAnswer) {
      const again = cc.el("button", { type: "button", class: "link-button turn-action", text: "Regenerate" });
      again.addEventListener("click", () => regenerate(lastUser));
      lastAnswer.querySelector(".msg-meta").append(again);
    }
    const edit = cc.el("button", { type: "button", class: "link-button turn-action", text: "Edit" });
    edit.addEventListener("click", () => editMessage(lastUser));
    lastUser.querySelector(".msg-meta").append(edit);
    offerUndo();
  }

  // Everything after the user's message leaves the page (the server deletes it too).
  function dropAfter(article) {
    while (article.nextElementSibling) article.nextElementSibling.remove();
  }

  async function regenerate(userArticle) {
    if (state.running) return;
    dropAfter(userArticle);
    await runTurn(userArticle.querySelector(".bubble").textContent, "lastAnswer");
  }

  // The last message becomes a form: `Edit message`, `Resend`, `Cancel` (`text`: what the
  // box holds instead of the message; `problem`: why it was not sent).
  function editMessage(article, text, problem) {
    const bubble = article.querySelector(".bubble");
    const id = "edit-" + Date.now();
    const box = cc.el("textarea", { id, class: "edit-box", rows: "2", "aria-describedby": id + "-error" });
    box.value = text ?? bubble.textContent;
    const error = cc.el("p", { id: id + "-error", class: "field-error", role: "alert" });
    cc.show(error, problem || "");
    const form = cc.el(
      "form",
      { class: "edit-form" },
      cc.el("label", { for: id, class: "visually-hidden", text: "Edit message" }),
      box,
      error,
      cc.el("div", { class: "edit-actions" },
        cc.el("button", { type: "button", class: "secondary small", text: "Cancel" }),
        cc.el("button", { type: "submit", class: "primary small", text: "Resend" }))
    );
    const close = () => {
      form.remove();
      bubble.hidden = false;
      turnActions();
    };
    form.querySelector("button[type=button]").addEventListener("click", close);
    form.addEventListener("keydown", (event) => {
      if (event.key === "Escape") close();
    });
    box.addEventListener("input", () => {
      grow(box);
      cc.show(error, "");
      box.removeAttribute("aria-invalid");
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const text = box.value;
      if (state.running) return;
      const problem = messageProblem(text);
      if (problem) {
        cc.show(error, text.trim() ? problem : "The message cannot be empty: write what to send instead, or Cancel to keep it as it is.");
        box.setAttribute("aria-invalid", "true");
        box.focus();
        return;
      }
      form.remove();
      bubble.textContent = text;
      bubble.hidden = false;
      article.querySelector("time").replaceWith(timeOf());
      dropAfter(article);
      await runTurn(text, "lastMessage");
    });
    for (const old of ui.messages.querySelectorAll(".turn-action")) old.remove();
    bubble.hidden = true;
    bubble.after(form);
    grow(box);
    box.focus();
  }

  // A text box as tall as its text, up to its CSS `max-height`.
  function grow(box) {
    box.style.height = "auto";
    box.style.height = box.scrollHeight + 2 + "px";
  }

  // A call that writes waits for the reader: Approve or Deny on its card.
  function askApproval(answer, call) {
    const entry = answer.cards[call.id];
    if (!entry || !controls.messageId) return;
    entry.status.textContent = "Needs approval";
    const base = CHAT_URL + "/" + encodeURIComponent(controls.messageId) + "/tool-calls/" + encodeURIComponent(call.id);
    const approve = cc.el("button", { type: "button", class: "primary small", text: "Approve" });
    const deny = cc.el("button", { type: "button", class: "secondary small", text: "Deny" });
    const buttons = cc.el("div", { class: "tool-approval" }, approve, deny);
    const decide = async (what) => {
      approve.disabled = deny.disabled = true;
      const result = await cc.api("POST", base + "/" + what);
      if (result.status === 200 || result.status === 409) {
        buttons.remove();
        // The stream may have brought the call's result before this answer: it stays.
        if (entry.status.classList.contains("running")) entry.status.textContent = "Running…";
      } else {
        approve.disabled = deny.disabled = false;
        cc.show(answer.error, "The answer was not sent: " + cc.errorText(result));
      }
    };
    approve.addEventListener("click", () => decide("approve"));
    deny.addEventListener("click", () => decide("deny"));
    entry.card.append(buttons);
  }

  function appendText(answer, delta) {
    // Text after a tool card starts a new block, so text and tool calls keep their order.
    if (!answer.text) {
      answer.text = cc.el("div", { class: "markdown" });
      answer.textValue = "";
      answer.body.append(answer.text);
      answer.blocks.push("");
    }
    answer.textValue += delta;
    answer.blocks[answer.blocks.length - 1] = answer.textValue;
    renderMarkdown(answer.text, answer.textValue);
  }

  // A tool card: the tool's title, its arguments as labelled fields, the raw JSON (the call,
  // then its result) behind `Details`.
  function toolStarted(answer, call) {
    answer.text = null;
    const status = cc.el("span", { class: "tool-status running", text: "Running…" });
    const fields = Object.entries(call.arguments && typeof call.arguments === "object" ? call.arguments : {}).map(([key, value]) =>
      cc.el("div", {}, cc.el("dt", { text: words(key) }), cc.el("dd", { text: shown(value) }))
    );
    const raw = cc.el("pre", { class: "tool-raw" });
    raw.textContent = JSON.stringify({ name: call.name, arguments: call.arguments ?? {} }, null, 2);
    const details = cc.el("details", { class: "tool-details" }, cc.el("summary", { text: "Details" }), raw);
    const card = cc.el(
      "div",
      { class: "tool-card", "data-tool-call-id": call.id || "", "data-tool": call.name || "" },
      cc.el("div", { class: "tool-head" }, cc.el("span", { class: "tool-icon", "aria-hidden": "true", text: "⚙" }),
        cc.el("span", { class: "tool-name", text: toolTitle(call.name) }), status),
      fields.length ? cc.el("dl", { class: "tool-args" }, ...fields) : null,
      details
    );
    answer.cards[call.id] = { card, status, details };
    answer.body.append(card);
  }

  function toolFinished(answer, result) {
    const entry = answer.cards[result.toolCallId];
    if (!entry) return;
    entry.status.classList.remove("running");
    const raw = cc.el("pre", { class: "tool-result" });
    raw.textContent = JSON.stringify(result.success ? result.result : { error: result.error }, null, 2);
    entry.details.append(cc.el("p", { class: "tool-label", text: result.success ? "Result" : "Error" }), raw);
    if (result.success) {
      entry.status.textContent = "Succeeded";
      entry.status.classList.add("ok");
    } else {
      entry.status.textContent = "Failed";
      entry.status.classList.add("failed");
      entry.details.before(cc.el("p", { class: "tool-error", text: result.error || "The tool failed." }));
    }
  }

  // The tool's title as the service names it, else its whole name in words (its group says
  // what it works on: `contacts_lookup` reads "Contacts lookup").
  function toolTitle(name) {
    return state.tools[name] || words(name || "tool");
  }

  // `contactId` → "Contact id", `get-free-slots` → "Get free slots".
  function words(key) {
    const spaced = String(key).replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/[_-]+/g, " ").trim().toLowerCase();
    return spaced.charAt(0).toUpperCase() + spaced.slice(1);
  }

  function shown(value) {
    if (value === null || value === undefined) return "—";
    if (Array.isArray(value) && value.every((item) => typeof item !== "object")) return value.join(", ");
    if (typeof value === "object") return JSON.stringify(value);
    return String(value);
  }

  // -- the tools: titles for the cards, prompts for an empty chat ------------------------------

  // Prompts a broker may start with, by the tool that answers them.
  const PROMPTS = {
    "contacts_get-contacts": "Who are my newest contacts?",
    "calendars_get-calendar-events": "What is on my calendar this week?",
    "opportunities_search-opportunity": "Which deals are open in my pipeline?",
    "conversations_search-conversation": "Which conversations are waiting for my reply?",
    "contacts_get-all-tasks": "Which tasks are due for my contacts?",
  };

  const CRM_APP = /^(contacts|calendars|conversations|opportunities|locations|emails|payments)_/;

  async function loadTools() {
    const result = await cc.api("GET", TOOLS_URL);
    const tools = result.status === 200 ? result.data.tools : [];
    for (const tool of tools) if (tool.title) state.tools[tool.name] = tool.title;
    const prompts = tools.filter((tool) => PROMPTS[tool.name]).map((tool) => PROMPTS[tool.name]);
    // Another source's tools (the MCP server's) by their titles.
    for (const tool of tools) {
      if (tool.title && !CRM_APP.test(tool.name)) prompts.push(`${tool.title}: what can you do for me?`);
    }
    const buttons = prompts.slice(0, 4).map((prompt) => {
      const button = cc.el("button", { type: "button", class: "secondary suggestion", text: prompt });
      button.addEventListener("click", () => {
        ui.input.value = prompt;
        send();
      });
      return cc.el("li", {}, button);
    });
    ui.suggestions.replaceChildren(...buttons);
    ui.suggestions.hidden = !buttons.length;
  }

  // A chat error as the reader is told it: an administrator reads the service's own words
  // (and the provider's status code); a broker a plain sentence of what to do, else
  // `otherwise` (a refusal before the answer started is shown in its own words).
  function chatError(error, code, otherwise) {
    if (state.admin) return code ? `${error} (code ${code})` : error || "An unexpected error occurred";
    const text = String(error || "");
    const status = Number(code) || 0;
    if (/^No API key configured|^Configuration error/.test(text) || status === 401 || status === 403) {
      return "The assistant is not set up correctly. Please tell your administrator.";
    }
    if (status === 429 || status >= 500 || /overloaded|timed out/i.test(text)) {
      return "The assistant is busy right now. Please try again in a moment.";
    }
    if (text === "Monthly token quota reached") return "You have used this month's allowance of the assistant.";
    if (text === "Conversation not found") return "This conversation no longer exists. Start a new chat.";
    if (text === "The answer was interrupted") return "The answer was interrupted. Regenerate it to try again.";
    if (text === "An answer is still running in this conversation") return "An answer is still being written here. Wait for it or stop it first.";
    return otherwise || "The assistant could not answer this time. Please try again.";
  }

  function scrollToEnd(force) {
    if (force) state.follow = true;
    if (state.follow) ui.messages.scrollTop = ui.messages.scrollHeight;
  }

  // -- sending and the stream --------------------------------------------------------------------

  async function send() {
    // A message typed while the page still loads goes with the provider the list then shows.
    await state.providersLoaded;
    const text = ui.input.value;
    if (state.running || ui.input.disabled) return;
    const problem = messageProblem(text);
    if (problem) {
      cc.show(ui.composerError, problem);
      ui.input.focus();
      return;
    }
    cc.show(ui.pageError, "");
    cc.show(ui.composerError, "");
    const welcomed = !ui.welcome.hidden;
    ui.welcome.hidden = true;
    const article = addUserMessage(text);
    ui.input.value = "";
    grow(ui.input);
    showCount();
    const refused = await runTurn(text);
    if (!refused) return;
    // Refused before anything was stored: the message leaves the page and goes back into
    // the composer (unless something new was typed meanwhile), with the reason above it.
    article.remove();
    ui.welcome.hidden = !welcomed;
    turnActions();
    if (!ui.input.value) ui.input.value = text;
    grow(ui.input);
    showCount();
    cc.show(ui.composerError, refused);
    ui.input.focus();
  }

  // Why a message cannot be sent as it is ("" when it can): empty, or over the chat's limit.
  function messageProblem(text) {
    if (!text.trim()) return "Write a message first: an empty message cannot be sent.";
    const count = charCount(text);
    if (count <= state.maxChars) return "";
    return (
      `This message is too long to send: it has ${number(count)} characters, and a message can have ` +
      `at most ${number(state.maxChars)} (about ${number(wordsIn(state.maxChars))} words). ` +
      "Shorten it or send it in parts."
    );
  }

  // Characters as the service counts them (code points, so an emoji is one).
  function charCount(text) {
    let count = 0;
    for (const _ of text) count++;
    return count;
  }

  // Words in so many characters of ordinary English (about six characters a word).
  function wordsIn(chars) {
    return chars >= 6000 ? Math.floor(chars / 6000) * 1000 : Math.max(1, Math.round(chars / 6));
  }

  function number(value) {
    return value.toLocaleString("en-US");
  }

  // Near the limit (from nine tenths of it), the count of characters under the composer.
  function showCount() {
    cc.show(ui.composerError, "");
    const text = ui.input.value;
    const near = Math.floor(state.maxChars * 0.9);
    const count = text.length < near ? 0 : charCount(text); // UTF-16 length >= code points
    if (count < near) {
      cc.show(ui.count, "");
      return;
    }
    const over = count - state.maxChars;
    ui.count.classList.toggle("over", over > 0);
    const said = `${number(count)} of ${number(state.maxChars)} characters`;
    cc.show(ui.count, over > 0 ? `${said}: ${number(over)} too many to send` : said);
  }

  // One turn: a new message, or (`replace`) the last answer or last message again. Returns
  // the reason when the service refused it before starting (then nothing of it was stored).
  async function runTurn(text, replace) {
    state.running = true;
    ui.send.disabled = true;
    turnActions();
    const answer = newAnswer();
    answer.article.setAttribute("aria-busy", "true");
    scrollToEnd(true);
    let refused = "";
    try {
      refused = await stream(text, answer, replace);
      if (refused) answer.article.remove();
    } finally {
      answerEnded(answer);
    }
    if (refused && replace) await refusedReplace(refused, text, replace);
    else if (replace) await refreshTitle();
    return refused;
  }

  // A regenerate or an edit the service refused changed nothing: the conversation is shown
  // again as stored, an edit reopened with its text, and the reason beside it.
  async function refusedReplace(refused, text, replace) {
    ui.messages.replaceChildren(ui.welcome);
    await openConversation(state.conversationId);
    const lastUser = [...ui.messages.querySelectorAll(".msg.user")].pop();
    if (replace === "lastMessage" && lastUser) editMessage(lastUser, text, refused);
    else cc.show(ui.pageError, refused);
  }

  // An edit of the first message may have moved the title: the list has it.
  async function refreshTitle() {
    await refreshList();
    const entry = state.conversations.find((c) => c.id === state.conversationId);
    if (entry) setTitle(entry.title);
  }

  async function stream(text, answer, replace) {
    const body = { provider: ui.provider.value };
    if (replace !== "lastAnswer") body.message = text;
    if (state.conversationId) body.conversationId = state.conversationId;
    if (replace) body.replace = replace;
    let response;
    try {
      response = await fetch(CHAT_URL + "?ids=1&deltas=tokens", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
        credentials: "same-origin",
        body: JSON.stringify(body),
      });
    } catch (err) {
      return "The service cannot be reached, so your message was not sent. Check your connection and send it again.";
    }
    if (!response.ok || !(response.headers.get("content-type") || "").startsWith("text/event-stream")) {
      if (response.status === 401) cc.toLogin();
      let data = null;
      try {
        data = await response.json();
      } catch (err) {}
      const error = data && typeof data.error === "string" ? data.error : "";
      return error ? chatError(error, "", error) : cc.errorText({ status: response.status, data });
    }
    let finished;
    try {
      finished = await readFrames(response, answer, text);
    } catch (err) {
      finished = false;
    }
    if (!finished && controls.messageId) {
      // The connection was lost: the answer goes on on the server; read the rest of it.
      finished = await follow(answer, text, controls.messageId, answer.lastId);
    }
    if (!finished) {
      cc.show(answer.error, "The answer ended before it was complete. Reload the page to see what was saved.");
    }
  }

  // Reads a stream's frames into the answer; true when it ended the answer.
  async function readFrames(response, answer, text) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
        const parsed = parseFrame(frame);
        if (!parsed) continue;
        if (parsed.n) answer.lastId = parsed.n;
        if (handle(parsed.event, answer, text)) return true;
      }
    }
  }

  // The message's events after `after`, from whichever server answers (a few tries).
  async function follow(answer, text, messageId, after) {
    for (let attempt = 0; attempt < 5; attempt++) {
      if (attempt) await new Promise((done) => setTimeout(done, 1000 * attempt));
      let response;
      try {
        response = await fetch(CHAT_URL + "/" + encodeURIComponent(messageId) + "/events?after=" + (answer.lastId || after), {
          headers: { Accept: "text/event-stream" },
          credentials: "same-origin",
        });
      } catch (err) {
        continue;
      }
      if (response.status === 401) cc.toLogin();
      if (response.status === 404) return false;
      if (!response.ok) continue;
      try {
        if (await readFrames(response, answer, text)) return true;
      } catch (err) {}
    }
    return false;
  }

  // One frame: its event and, with ids, its number (`id: <messageId>:<n>`).
  function parseFrame(frame) {
    const lines = frame.split(/\r?\n/);
    const data = lines
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).replace(/^ /, ""))
      .join("\n");
    if (!data) return null;
    const idLine = lines.find((line) => line.startsWith("id:"));
    const n = idLine ? Number(idLine.slice(idLine.lastIndexOf(":") + 1)) || 0 : 0;
    try {
      return { event: JSON.parse(data), n };
    } catch (err) {
      return null;
    }
  }

  // -- undo of the assistant's writes (the ledger, /activity) ---------------------------------

  // An `Undo` button on each tool card whose write can still be undone: the open
  // conversation's ledger entries, matched to the cards by tool call id (oldest first).
  async function offerUndo() {
    const id = state.conversationId;
    const result = await cc.api("GET", "/api/v1/control-center/activity?limit=200&conversationId=" + encodeURIComponent(id));
    if (result.status !== 200 || id !== state.conversationId) return;
    const entries = {};
    for (const entry of result.data.entries.slice().reverse()) {
      if (entry.toolCallId) (entries[entry.toolCallId] = entries[entry.toolCallId] || []).push(entry);
    }
    for (const card of ui.messages.querySelectorAll(".tool-card[data-tool-call-id]")) {
      const entry = (entries[card.dataset.toolCallId] || []).shift();
      for (const old of card.querySelectorAll(".tool-undo")) old.remove();
      if (!entry || !entry.undoable) continue;
      const undo = cc.el("button", { type: "button", class: "link-button tool-undo", text: "Undo", title: entry.summary });
      // What the last undo said stays on the card; the card has one such line.
      const said = card.querySelector(".tool-undo-status") || card.appendChild(cc.el("p", { class: "tool-undo-status", role: "status" }));
      undo.addEventListener("click", async () => {
        undo.disabled = true;
        const done = await cc.api("POST", "/api/v1/control-center/activity/" + encodeURIComponent(entry.id) + "/undo");
        said.textContent = done.status === 200 ? "Undone: " + done.data.entry.summary : "Not undone: " + cc.errorText(done);
        if (done.status === 200) undo.remove();
        else undo.disabled = false;
      });
      card.querySelector(".tool-head").append(undo);
    }
  }

  // Applies one event; true when it ends the answer (message_complete or error).
  function handle(event, answer, text) {
    switch (event.type) {
      case "message_start":
        if (!state.conversationId) {
          state.conversationId = event.conversationId;
          history.replaceState(null, "", "/chat/" + encodeURIComponent(event.conversationId));
          setTitle(text.slice(0, 100));
          ui.del.hidden = ui.rename.hidden = false;
          refreshList();
        }
        answer.started = true;
        controls.started(event.messageId);
        return false;
      case "content_delta":
        appendText(answer, event.delta || "");
        break;
      case "tool_call_start":
        toolStarted(answer, event.toolCall || {});
        break;
      case "tool_result":
        toolFinished(answer, event.toolResult || {});
        break;
      case "tool_approval_required":
        askApproval(answer, event.toolCall || {});
        break;
      case "provider_fallback":
        answer.body.append(cc.el("p", { class: "muted notice-line", text: "The other AI provider took over this step." }));
        break;
      case "message_complete":
        if (event.stopped) answer.body.append(cc.el("p", { class: "stopped muted", text: "Stopped" }));
        answerDone(answer, event.message || {});
        return true;
      case "error":
        cc.show(answer.error, chatError(event.error, event.code));
        return true;
      default:
        return false;
    }
    scrollToEnd(false);
    return false;
  }
})();
