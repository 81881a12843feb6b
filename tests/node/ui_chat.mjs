// One turn of a Vercel AI SDK front end against the running service, with the package's own
// parts: DefaultChatTransport (useChat's default HTTP transport) posts the body and parses the
// stream, validating every chunk with the package's uiMessageChunkSchema (an invalid chunk
// fails the stream); readUIMessageStream builds the UIMessage a useChat screen would show.
// Input (argv[2], JSON): {url, token, chatId, messages, body, trigger?, messageId?} (the
// trigger and message id useChat's regenerate() and sendMessage({messageId}) send). Output (stdout, JSON):
// {status, headers, chunks, message, errors, failure}.
import { DefaultChatTransport, readUIMessageStream, uiMessageChunkSchema } from "ai";
import { safeValidateTypes } from "@ai-sdk/provider-utils";

const input = JSON.parse(process.argv[2]);
const seen = {};
const transport = new DefaultChatTransport({
  api: input.url,
  headers: { Authorization: `Bearer ${input.token}` },
  body: input.body ?? {},
  fetch: async (url, init) => {
    const response = await fetch(url, init);
    seen.status = response.status;
    seen.headers = Object.fromEntries(response.headers.entries());
    return response;
  },
});

const out = { chunks: [], message: null, errors: [], failure: null };
try {
  const stream = await transport.sendMessages({
    chatId: input.chatId,
    messages: input.messages,
    trigger: input.trigger ?? "submit-message",
    messageId: input.messageId,
    abortSignal: undefined,
  });
  const [forChunks, forMessage] = stream.tee();
  const collect = (async () => {
    for await (const chunk of forChunks) {
      // Already validated by the transport; checked again here so that a test fails loudly.
      const checked = await safeValidateTypes({ value: chunk, schema: uiMessageChunkSchema });
      if (!checked.success) throw new Error(`invalid chunk ${JSON.stringify(chunk)}`);
      out.chunks.push(chunk);
    }
  })();
  const messages = readUIMessageStream({
    stream: forMessage,
    onError: (error) => out.errors.push(String(error?.message ?? error)),
  });
  for await (const message of messages) out.message = message;
  await collect;
} catch (error) {
  out.failure = String(error?.message ?? error);
}
process.stdout.write(JSON.stringify({ ...seen, ...out }));
