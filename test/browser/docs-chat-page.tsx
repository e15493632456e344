// A React page with useChat. `getToken`: the page's current user token (docs/users.md) of the session it names,
// fetched again from the product's backend when it is about to expire (user tokens last at most an hour).
import { useChat } from "@ai-sdk/react";
import { APICallError, DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";
import { useState } from "react";

/** What to tell the person: the problem's `detail` (a 429 says when to try again), or the error's message. */
function problemText(error: Error): string {
  if (!APICallError.isInstance(error)) return error.message;
  try {
    const problem = JSON.parse(error.responseBody ?? "") as { detail?: string };
    return problem.detail ?? error.message;
  } catch {
    return error.message;
  }
}

export function Chat({ base, session, getToken }: { base: string; session: string; getToken: () => Promise<string> }) {
  const [text, setText] = useState("");
  const { messages, sendMessage, addToolApprovalResponse, status, error, clearError } = useChat({
    id: "root", // the chat: `root`, a conversation id, or any id the page makes up (see "A chat is a pointer")
    resume: true, // after a reload: GET .../chat/root/stream (204 when nothing is live)
    transport: new DefaultChatTransport({
      api: `${base}/v1/sessions/${session}/chat`,
      // A function: every request (send, resume, approval) asks for the current token.
      headers: async () => ({ authorization: `Bearer ${await getToken()}` }),
    }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const busy = status === "submitted" || status === "streaming";
  return (
    <div>
      {messages.map((m) => (
        <p key={m.id}>
          <b>{m.role}:</b>{" "}
          {m.parts.map((p, i) =>
            p.type === "text" ? (
              <span key={i}>{p.text}</span>
            ) : p.type.startsWith("tool-") && "approval" in p && p.state === "approval-requested" ? (
              <button key={i} onClick={() => addToolApprovalResponse({ id: p.approval.id, approved: true })}>
                Approve {p.type.slice(5)}
              </button>
            ) : null,
          )}
        </p>
      ))}
      {error === undefined ? null : (
        // A refusal (429 over a limit, 401 an expired or revoked token) wrote nothing: show it, then let the
        // person send again (the next request asks getToken for a fresh token).
        <p role="alert">
          {problemText(error)} <button onClick={clearError}>Dismiss</button>
        </p>
      )}
      <form onSubmit={(e) => (e.preventDefault(), clearError(), sendMessage({ text }), setText(""))}>
        <input value={text} onChange={(e) => setText(e.target.value)} disabled={busy} />
      </form>
    </div>
  );
}
