/**
 * A React page with `useChat` (`@ai-sdk/react`) talking to a session over the AI SDK's UI message stream,
 * as docs/frontends.md shows it. Bundled with esbuild by test/browser/console.test.ts and served from
 * another origin than the API. The page reads `base`, `session` and `token` (a user token of the session)
 * from its URL's fragment, so the token never reaches the page's server, starts from the conversation's
 * history (`GET .../chat/root/messages`) and resumes a live turn (`GET .../chat/root/stream`). A tool call
 * waiting for approval shows an Approve button (the answer is sent automatically); Edit sends the input's text as
 * the newest user message's new text, Regenerate runs the last answer again.
 */
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, type UIMessage } from "ai";
import { useState } from "react";
import { createRoot } from "react-dom/client";

interface Props {
  readonly base: string;
  readonly session: string;
  readonly token: string;
  readonly history: UIMessage[];
}

function Chat({ base, session, token, history }: Props) {
  const [text, setText] = useState("");
  const { messages, sendMessage, regenerate, addToolApprovalResponse, status, error } = useChat({
    id: "root",
    messages: history,
    resume: true,
    transport: new DefaultChatTransport({
      api: `${base}/v1/sessions/${session}/chat`,
      headers: { authorization: `Bearer ${token}` },
    }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const lastUser = [...messages].reverse().find((message) => message.role === "user");
  return (
    <main>
      <ol id="messages">
        {messages.map((message) => (
          <li key={message.id} data-role={message.role} data-id={message.id}>
            <b>{message.role}:</b>{" "}
            {message.parts.map((part, i) =>
              part.type === "text" ? (
                <span key={i} className="text">
                  {part.text}
                </span>
              ) : part.type.startsWith("tool-") && "state" in part ? (
                <span key={i} className="tool" data-state={part.state}>
                  {part.state === "approval-requested" && "approval" in part && part.approval !== undefined ? (
                    <button
                      className="approve"
                      type="button"
                      onClick={() => void addToolApprovalResponse({ id: part.approval.id, approved: true })}
                    >
                      Approve
                    </button>
                  ) : null}
                </span>
              ) : null,
            )}
          </li>
        ))}
      </ol>
      <form
        id="composer"
        onSubmit={(event) => {
          event.preventDefault();
          void sendMessage({ text });
          setText("");
        }}
      >
        <input id="input" value={text} onChange={(event) => setText(event.target.value)} />
        <button id="send" type="submit" disabled={status !== "ready" || text === ""}>
          Send
        </button>
        <button
          id="edit"
          type="button"
          disabled={status !== "ready" || text === "" || lastUser === undefined}
          onClick={() => {
            if (lastUser !== undefined) void sendMessage({ text, messageId: lastUser.id });
            setText("");
          }}
        >
          Edit
        </button>
        <button id="regenerate" type="button" disabled={status !== "ready"} onClick={() => void regenerate()}>
          Regenerate
        </button>
      </form>
      <p id="status" data-status={status}>
        {error === undefined ? status : `error: ${error.message}`}
      </p>
    </main>
  );
}

async function start(): Promise<void> {
  const params = new URLSearchParams(location.hash.slice(1));
  const base = params.get("base") ?? "";
  const session = params.get("session") ?? "";
  const token = params.get("token") ?? "";
  const answer = await fetch(`${base}/v1/sessions/${session}/chat/root/messages`, {
    headers: { authorization: `Bearer ${token}` },
  });
  if (!answer.ok) throw new Error(`history: ${answer.status}`);
  const history = (await answer.json()) as UIMessage[];
  const root = document.getElementById("root");
  if (root === null) throw new Error("no #root");
  createRoot(root).render(<Chat base={base} session={session} token={token} history={history} />);
}

void start();
