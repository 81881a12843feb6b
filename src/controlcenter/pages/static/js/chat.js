// The chat page: the conversation list, one conversation, and the answer as it streams.
// The chat endpoint is a POST, so its event stream is read with fetch, frame by frame.
"use strict";

(function () {
  const CHAT_URL = "/api/v1/control-center/chat";
  const CONVERSATIONS_URL = "/api/v1/control-center/conversations";

  // `follow`: keep the newest text in view, until the reader scrolls up to read back.
  const state = { conversationId: "", running: false, follow: true, nextCursor: null };
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
    };
    ui.stop.addEventListener("click", () => controls.stop());
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
    const running = controls.pending(id);
    if (running && !conversation.messages.some((m) => m.id === running)) await resumeAnswer(running);
    else if (running) controls.ended();
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
      if (!finished) showAnswerError(answer, "The answer could not be followed. Reload the page to see what was saved.");
    } finally {
      answerEnded(answer);
    }
  }

  // However an answer ends (done, stopped, failed, cut), the composer is free again.
  function answerEnded(answer) {
    answer.article.removeAttribute("aria-busy");
    state.running = false;
    ui.send.disabled = false;
    controls.ended();
    scrollToEnd(false);
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
    return { article, body, error, text: null, textValue: "", cards: {}, lastId: 0 };
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
    if (message.usage) showUsage(answer, message.usage);
  }

  function showUsage(answer, usage) {
    const text = `${usage.inputTokens} tokens in · ${usage.outputTokens} out`;
    answer.article.append(cc.el("p", { class: "usage muted", text }));
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
        entry.status.textContent = "Running…";
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
      answerEnded(answer);
    }
  }

  async function stream(text, answer) {
    const body = { message: text, provider: ui.provider.value };
    if (state.conversationId) body.conversationId = state.conversationId;
    let response;
    try {
      response = await fetch(CHAT_URL + "?ids=1&deltas=tokens", {
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
      showAnswerError(answer, "The answer ended before it was complete. Reload the page to see what was saved.");
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

  // Applies one event; true when it ends the answer (message_complete or error).
  function handle(event, answer, text) {
    switch (event.type) {
      case "message_start":
        if (!state.conversationId) {
          state.conversationId = event.conversationId;
          history.replaceState(null, "", "/chat/" + encodeURIComponent(event.conversationId));
          setTitle(text.slice(0, 100));
          ui.del.hidden = false;
          refreshList();
        }
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
        if (event.stopped) answer.article.append(cc.el("p", { class: "stopped muted", text: "Stopped" }));
        if (event.message && event.message.usage) showUsage(answer, event.message.usage);
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
