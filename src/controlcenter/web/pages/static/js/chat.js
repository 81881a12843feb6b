// The chat page: the conversation list, one conversation, and the answer as it streams.
// The chat endpoint is a POST, so its event stream is read with fetch, frame by frame.
"use strict";

(function () {
  const CHAT_URL = "/api/v1/control-center/chat";
  const CONVERSATIONS_URL = "/api/v1/control-center/conversations";

  // `follow`: keep the newest text in view, until the reader scrolls up to read back.
  const state = { conversationId: "", running: false, follow: true, nextCursor: null };
  let ui;

  // Chat controls (CONTRACT 11) plug in here: the Stop button and resuming a running answer
  // after a reload. `started` gets the messageId of an answer that is running; `ended` is
  // called when it finishes in any way. Until the stop endpoint exists, Stop stays hidden.
  const controls = {
    started(messageId) {},
    ended() {},
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
    };
    state.conversationId = document.body.dataset.conversationId || "";
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
    // The provider is the reader's choice, kept in this browser.
    ui.provider.value = localStorage.getItem("cc.provider") || "provider_a";
    ui.provider.addEventListener("change", () => localStorage.setItem("cc.provider", ui.provider.value));
    refreshList();
    if (state.conversationId) openConversation(state.conversationId);
    ui.input.focus();
  });

  // -- the conversation list -----------------------------------------------------------------

  // The first page of the list, or (with a cursor) the next page added below it.
  async function refreshList(cursor) {
    const url = CONVERSATIONS_URL + (cursor ? "?cursor=" + encodeURIComponent(cursor) : "");
    const result = await cc.api("GET", url);
    if (result.status !== 200) {
      cc.show(ui.pageError, "The conversation list could not be loaded: " + cc.errorText(result));
      return;
    }
    const items = result.data.conversations.map((c) => {
      const link = cc.el("a", { href: "/chat/" + encodeURIComponent(c.id), text: c.title || "Untitled" });
      if (c.id === state.conversationId) link.setAttribute("aria-current", "page");
      return cc.el("li", {}, link);
    });
    if (cursor) ui.list.append(...items);
    else ui.list.replaceChildren(...items);
    state.nextCursor = result.data.nextCursor || null;
    ui.older.hidden = !state.nextCursor;
    ui.listEmpty.hidden = ui.list.children.length > 0;
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
    ui.del.hidden = false;
    ui.welcome.hidden = true;
    for (const message of conversation.messages) {
      if (message.role === "user") addUserMessage(message.content);
      else renderStoredAnswer(message);
    }
    scrollToEnd(true);
  }

  function startNew() {
    state.conversationId = "";
    history.replaceState(null, "", "/chat");
    setTitle("New chat");
    ui.del.hidden = true;
    ui.messages.replaceChildren(ui.welcome);
    ui.welcome.hidden = false;
  }

  function setTitle(text) {
    ui.title.textContent = text || "Untitled";
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

  function addUserMessage(text) {
    const bubble = cc.el("div", { class: "bubble" });
    bubble.textContent = text;
    ui.messages.append(cc.el("article", { class: "msg user", "aria-label": "You" }, bubble));
  }

  function newAnswer() {
    const body = cc.el("div", { class: "answer-body" });
    const error = cc.el("div", { class: "alert", role: "alert" });
    error.hidden = true;
    const article = cc.el("article", { class: "msg assistant", "aria-label": "Assistant" }, body, error);
    ui.messages.append(article);
    return { article, body, error, text: null, textValue: "", cards: {} };
  }

  function renderStoredAnswer(message) {
    const answer = newAnswer();
    const results = {};
    for (const result of message.toolResults || []) results[result.toolCallId] = result;
    for (const call of message.toolCalls || []) {
      toolStarted(answer, call);
      if (results[call.id]) toolFinished(answer, results[call.id]);
    }
    if (message.content) appendText(answer, message.content);
  }

  function appendText(answer, delta) {
    // Text after a tool card starts a new block, so text and tool calls keep their order.
    if (!answer.text) {
      answer.text = cc.el("div", { class: "markdown" });
      answer.textValue = "";
      answer.body.append(answer.text);
    }
    answer.textValue += delta;
    renderMarkdown(answer.text, answer.textValue);
  }

  function toolStarted(answer, call) {
    answer.text = null;
    const status = cc.el("span", { class: "tool-status running", text: "Running…" });
    const args = cc.el("pre", { class: "tool-args" });
    const compact = JSON.stringify(call.arguments ?? {});
    args.textContent = compact.length > 60 ? JSON.stringify(call.arguments, null, 2) : compact;
    const card = cc.el(
      "div",
      { class: "tool-card", "data-tool-call-id": call.id || "" },
      cc.el("div", { class: "tool-head" }, cc.el("span", { class: "tool-icon", "aria-hidden": "true", text: "⚙" }),
        cc.el("span", { class: "tool-name", text: call.name || "tool" }), status),
      cc.el("div", { class: "tool-label", text: "Arguments" }),
      args
    );
    answer.cards[call.id] = { card, status };
    answer.body.append(card);
  }

  function toolFinished(answer, result) {
    const entry = answer.cards[result.toolCallId];
    if (!entry) return;
    entry.status.classList.remove("running");
    if (result.success) {
      entry.status.textContent = "Succeeded";
      entry.status.classList.add("ok");
      const pre = cc.el("pre", { class: "tool-result" });
      pre.textContent = JSON.stringify(result.result, null, 2);
      entry.card.append(cc.el("details", {}, cc.el("summary", { text: "Result" }), pre));
    } else {
      entry.status.textContent = "Failed";
      entry.status.classList.add("failed");
      entry.card.append(cc.el("p", { class: "tool-error", text: result.error || "The tool failed." }));
    }
  }

  function showAnswerError(answer, text) {
    cc.show(answer.error, text);
  }

  function scrollToEnd(force) {
    if (force) state.follow = true;
    if (state.follow) ui.messages.scrollTop = ui.messages.scrollHeight;
  }

  // -- sending and the stream --------------------------------------------------------------------

  async function send() {
    const text = ui.input.value;
    if (state.running || !text.trim()) return;
    state.running = true;
    ui.send.disabled = true;
    cc.show(ui.pageError, "");
    ui.welcome.hidden = true;
    addUserMessage(text);
    ui.input.value = "";
    const answer = newAnswer();
    answer.article.setAttribute("aria-busy", "true");
    scrollToEnd(true);
    try {
      await stream(text, answer);
    } finally {
      answer.article.removeAttribute("aria-busy");
      state.running = false;
      ui.send.disabled = false;
      controls.ended();
      scrollToEnd(false);
    }
  }

  async function stream(text, answer) {
    const body = { message: text, provider: ui.provider.value };
    if (state.conversationId) body.conversationId = state.conversationId;
    let response;
    try {
      response = await fetch(CHAT_URL, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
        credentials: "same-origin",
        body: JSON.stringify(body),
      });
    } catch (err) {
      showAnswerError(answer, "The service cannot be reached. Your message was not sent.");
      return;
    }
    if (!response.ok || !(response.headers.get("content-type") || "").startsWith("text/event-stream")) {
      if (response.status === 401) cc.toLogin();
      let data = null;
      try {
        data = await response.json();
      } catch (err) {}
      showAnswerError(answer, cc.errorText({ status: response.status, data }));
      return;
    }
    let finished = false;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
          const frame = buffer.slice(0, cut);
          buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
          const event = parseFrame(frame);
          if (event && handle(event, answer, text)) finished = true;
        }
      }
    } catch (err) {
      showAnswerError(answer, "The connection was lost before the answer finished. Reload the page to see what was saved.");
      return;
    }
    if (!finished) {
      showAnswerError(answer, "The answer ended before it was complete. Reload the page to see what was saved.");
    }
  }

  function parseFrame(frame) {
    const data = frame
      .split(/\r?\n/)
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).replace(/^ /, ""))
      .join("\n");
    if (!data) return null;
    try {
      return JSON.parse(data);
    } catch (err) {
      return null;
    }
  }

  // Applies one event; true when it ends the answer (message_complete or error).
  function handle(event, answer, text) {
    switch (event.type) {
      case "message_start":
        controls.started(event.messageId);
        if (!state.conversationId) {
          state.conversationId = event.conversationId;
          history.replaceState(null, "", "/chat/" + encodeURIComponent(event.conversationId));
          setTitle(text.slice(0, 100));
          ui.del.hidden = false;
          refreshList();
        }
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
      case "message_complete":
        return true;
      case "error":
        showAnswerError(answer, event.code ? `${event.error} (code ${event.code})` : event.error || "An unexpected error occurred");
        return true;
      default:
        return false;
    }
    scrollToEnd(false);
    return false;
  }
})();
