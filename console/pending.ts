/**
 * The console's pending panel (docs/console.md, docs/tools.md "Approvals and client tools"): every call
 * of the open session that waits for a person or a frontend, from the session watch's value `pi.pending`
 * (so a reload shows exactly what still waits, and an answered item leaves when its call consumes the
 * answer). An approval gets approve and deny buttons (with an optional reason); a client tool gets a form
 * for its output (JSON, or else the text as a string) and an "is error" box. Each answer is a `POST
 * .../pending/{id}`; a refusal (409: already answered, or closed by a deadline or an abort) is shown in
 * the status line.
 */
import type { SessionView } from "../src/core/watch-types.js";
import type { PendingItem } from "../src/kinds/pending-types.js";
import type { JsonValue } from "../src/storage/records.js";
import { el } from "./dom.js";

export type PendingAnswerBody =
  { readonly approve: boolean; readonly reason?: string } | { readonly output: JsonValue; readonly isError?: boolean };

/** The session's pending items, as the session watch's view carries them. */
export function pendingOf(view: SessionView): readonly PendingItem[] {
  const key = Object.keys(view.values).find((k) => (JSON.parse(k) as unknown[])[2] === "pi.pending");
  const items = key === undefined ? undefined : (view.values[key] as unknown);
  return Array.isArray(items) ? (items as PendingItem[]) : [];
}

/** A client tool's output as typed: JSON when it parses, else the text itself. */
function outputOf(text: string): JsonValue {
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    return text;
  }
}

/**
 * Render the items into `list`. `answer` posts one answer; the item's controls stay disabled until the
 * answer fails (an answered item leaves the list when the watch says so).
 */
export function renderPending(
  list: HTMLElement,
  items: readonly PendingItem[],
  answer: (id: string, body: PendingAnswerBody) => Promise<unknown>,
  onError: (error: unknown) => void,
): void {
  // Keep the rows that are still pending (a half-typed output survives other value events).
  const keep = new Set(items.map((item) => item.id));
  for (const row of [...list.children]) if (!keep.has(row.getAttribute("data-pending") ?? "")) row.remove();
  for (const item of items) {
    if (list.querySelector(`[data-pending="${CSS.escape(item.id)}"]`) !== null) continue;
    const row = el(
      "li",
      `${item.type === "approval" ? "approve" : "answer"} ${item.name} ${JSON.stringify(item.arguments)} `,
      { "data-pending": item.id, "data-type": item.type },
    );
    row.append(
      el(
        "small",
        `conversation ${item.conversationId}, task ${item.taskId}${item.deadline === undefined ? "" : `, until ${new Date(item.deadline).toLocaleString()}`}`,
      ),
      el("br", ""),
    );
    const controls: (HTMLButtonElement | HTMLInputElement | HTMLTextAreaElement)[] = [];
    const submit = (body: PendingAnswerBody): void => {
      for (const control of controls) control.disabled = true;
      answer(item.id, body).catch((error: unknown) => {
        for (const control of controls) control.disabled = false;
        onError(error);
      });
    };
    if (item.type === "approval") {
      const reason = el("input", "", {
        placeholder: "reason (optional)",
        "aria-label": `reason for ${item.id}`,
        "data-field": "reason",
      }) as HTMLInputElement;
      const approve = el("button", "approve", { "data-action": "approve" }) as HTMLButtonElement;
      const deny = el("button", "deny", { "data-action": "deny" }) as HTMLButtonElement;
      const withReason = (approveIt: boolean): PendingAnswerBody =>
        reason.value.trim() === "" ? { approve: approveIt } : { approve: approveIt, reason: reason.value.trim() };
      approve.addEventListener("click", () => submit(withReason(true)));
      deny.addEventListener("click", () => submit(withReason(false)));
      controls.push(reason, approve, deny);
      row.append(reason, " ", approve, " ", deny);
    } else {
      const output = el("textarea", "", {
        placeholder: "output (JSON or text)",
        "aria-label": `output for ${item.id}`,
        "data-field": "output",
      }) as HTMLTextAreaElement;
      const isError = el("input", "", {
        type: "checkbox",
        "aria-label": `is error for ${item.id}`,
        "data-field": "isError",
      }) as HTMLInputElement;
      const send = el("button", "answer", { "data-action": "answer" }) as HTMLButtonElement;
      send.addEventListener("click", () =>
        submit(
          isError.checked ? { output: outputOf(output.value), isError: true } : { output: outputOf(output.value) },
        ),
      );
      controls.push(output, isError, send);
      const label = el("label", " is error ");
      label.prepend(isError);
      row.append(output, label, send);
    }
    list.append(row);
  }
  if (items.length === 0) list.append(el("li", "nothing waits", { class: "none" }));
}
