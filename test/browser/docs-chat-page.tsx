// A React page with useChat. `token`: a user token (docs/users.md) of the session it names.
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";
import { useState } from "react";

export function Chat({ base, session, token }: { base: string; session: string; token: string }) {
  const [text, setText] = useState("");
  const { messages, sendMessage, addToolApprovalResponse, status } = useChat({
    id: "root", // the conversation: `root` or a conversation id
    resume: true, // after a reload: GET .../chat/root/stream (204 when nothing is live)
    transport: new DefaultChatTransport({
      api: `${base}/v1/sessions/${session}/chat`,
      headers: { authorization: `Bearer ${token}` },
    }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
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
      <form onSubmit={(e) => (e.preventDefault(), sendMessage({ text }), setText(""))}>
        <input value={text} onChange={(e) => setText(e.target.value)} disabled={status !== "ready"} />
      </form>
    </div>
  );
}
