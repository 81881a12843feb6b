// Assistant text is Markdown from a model that reads CRM data anyone can write to: it is
// parsed by marked and always sanitised by DOMPurify before it reaches the page.
"use strict";

window.renderMarkdown = (function () {
  DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  });
  const options = {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe"],
    FORBID_ATTR: ["style"],
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|tel:|#|\/(?!\/))/i,
  };
  // One listener for every code block's button, however often the text is rendered again.
  document.addEventListener("click", async (event) => {
    const button = event.target.closest && event.target.closest(".code-copy");
    if (!button) return;
    const code = button.parentElement.querySelector("pre");
    await cc.copyText(button, code ? code.textContent : "", "Copy code");
  });

  // Added after sanitising, by the DOM: a `Copy code` button on each code block, and each
  // table in a box of its own that scrolls sideways (a phone is narrower than most tables).
  function decorate(target) {
    for (const pre of target.querySelectorAll("pre")) {
      const box = document.createElement("div");
      box.className = "code-block";
      const button = document.createElement("button");
      button.type = "button";
      button.className = "code-copy";
      button.textContent = "Copy code";
      pre.tabIndex = 0; // a long line scrolls sideways: by the keyboard too
      pre.replaceWith(box);
      box.append(button, pre);
    }
    for (const table of target.querySelectorAll("table")) {
      const box = document.createElement("div");
      box.className = "table-scroll";
      box.tabIndex = 0; // scrolled by the keyboard too
      box.setAttribute("role", "region");
      box.setAttribute("aria-label", "Table");
      table.replaceWith(box);
      box.append(table);
    }
  }

  return function renderMarkdown(target, text) {
    const html = marked.parse(String(text || ""), { gfm: true, breaks: true, async: false });
    target.innerHTML = DOMPurify.sanitize(html, options);
    decorate(target);
    requestAnimationFrame(() => cc.scrollHints(target));
  };
})();
