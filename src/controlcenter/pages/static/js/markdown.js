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
  return function renderMarkdown(target, text) {
    const html = marked.parse(String(text || ""), { gfm: true, breaks: true, async: false });
    target.innerHTML = DOMPurify.sanitize(html, options);
  };
})();
