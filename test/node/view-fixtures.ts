/**
 * Conversation views built by hand for the frontend protocol folds' node tests (ui-stream-tool-input.test.ts,
 * ag-ui-events.test.ts): a view of conversation 1 with the given entries, tasks and previews, a running generation
 * (task 7) and the user entry (10) its turn answers.
 */
import type { ConversationView } from "../../src/core/watch-types.js";
import type { Entry, Task } from "../../src/storage/records.js";

export function view(parts: {
  entries?: Entry[];
  tasks?: Task[];
  previews?: Record<string, unknown>;
}): ConversationView {
  return {
    conversation: { id: 1 } as ConversationView["conversation"],
    tail: 100,
    entries: parts.entries ?? [],
    context: [],
    tasks: parts.tasks ?? [],
    inbox: [],
    values: {},
    previews: (parts.previews ?? {}) as ConversationView["previews"],
    faulted: false,
    readAt: 1,
  };
}

export const generation: Task = {
  id: 7,
  conversationId: 1,
  kind: "generation",
  role: "inflight",
  state: { status: "running" },
  after: [],
};

export const user: Entry = { id: 10, conversationId: 1, kind: "user" };
