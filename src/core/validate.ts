/**
 * Validation on the commit line (§2.1, §5.8, §7.3): the transcript rules storage cannot know, and the
 * ownership rules of ownership.ts (§5.4, §6.4). It runs
 * after the builder returns and before persistence, against committed state plus earlier writes of the
 * same batch, and throws a `PicoError`; a rejected batch writes nothing and consumes no ids.
 */
import type { AssistantMessage } from "@earendil-works/pi-ai";
import type { Conversation, Entry, Id, MainWrite } from "../storage/records.js";
import type { Segment } from "../storage/shared.js";
import type { Storage } from "../storage/storage.js";
import { isManagedSystem, systemKind } from "./entries.js";
import { invalid, PicoError } from "./errors.js";
import type { CommitOrigin } from "./session-types.js";
import { validateOwnership, type LiveSubtrees } from "./ownership.js";
import {
  asInputResult,
  checkResultTransition,
  INBOX_NAMESPACE,
  INPUT_RESULT_NAMESPACE,
  REQUEST_NAMESPACE,
  type InputResult,
} from "./inbox.js";

/** Live turn-task counts per conversation; the driver answers from its index, tests from storage. */
export interface LiveTurns {
  liveTurnTasks(conversationId: Id): Promise<number>;
}

/**
 * A conversation's fork chain as validation sees it (§2.4): the segments of conversations created in this
 * batch, nearest first, then the committed conversation below them with its cap. Storage answers that
 * one's fork-aware reads over the rest of the chain, deleted sources included: a deleted conversation is
 * hidden from lookups but stays a fork ancestor (§6.4), so core never walks committed records itself.
 */
export interface Chain {
  readonly local: readonly Segment[];
  readonly committed?: Segment;
}

export function chainOf(
  conversationId: Id,
  created: ReadonlyMap<Id, Conversation>,
  cap: Id = Number.MAX_SAFE_INTEGER,
): Chain {
  const local: Segment[] = [];
  let current = conversationId;
  let limit = cap;
  for (;;) {
    const conversation = created.get(current);
    if (conversation === undefined) return { local, committed: { conversationId: current, cap: limit } };
    local.push({ conversationId: current, cap: limit });
    if (conversation.parent === undefined) return { local };
    limit = Math.min(limit, conversation.parent.at);
    current = conversation.parent.conversationId;
  }
}

/** Whether an entry of this batch is in the chain's logical transcript. Batch ids are above every committed
 * fork point, so in the committed part only the committed conversation's own new entries are visible. */
function visibleInBatch(chain: Chain, entry: Entry): boolean {
  if (chain.local.some((s) => s.conversationId === entry.conversationId && entry.id <= s.cap)) return true;
  const committed = chain.committed;
  return committed !== undefined && committed.conversationId === entry.conversationId && entry.id <= committed.cap;
}

/** Whether an entry (of this batch or committed) is in the chain's logical transcript. */
async function visibleIn(
  chain: Chain,
  entry: Entry,
  batchEntries: ReadonlyMap<Id, Entry>,
  storage: Storage,
): Promise<boolean> {
  if (batchEntries.has(entry.id)) return visibleInBatch(chain, entry);
  const committed = chain.committed;
  if (committed === undefined || entry.id > committed.cap) return false;
  return visibleEntry(storage, committed.conversationId, entry.id);
}

/** Whether committed entry `id` is in the logical transcript of committed conversation `conversationId`
 * (one fork-aware point read; deleted fork sources still resolve). */
export async function visibleEntry(storage: Storage, conversationId: Id, id: Id): Promise<boolean> {
  const page = await storage.scanEntries({ conversationId, from: id, through: id, limit: 1 });
  return page.items[0]?.id === id;
}

function toolCallIds(entry: Entry): string[] | undefined {
  if (entry.kind !== "assistant") return undefined;
  const ids: string[] = [];
  for (const message of entry.model ?? []) {
    if (message.role !== "assistant") continue;
    const assistant = message as AssistantMessage;
    if (assistant.stopReason === "error" || assistant.stopReason === "aborted") continue;
    for (const part of assistant.content) if (part.type === "toolCall") ids.push(part.id);
  }
  return ids;
}

export interface ValidationContext {
  readonly storage: Storage;
  readonly origin: CommitOrigin | undefined;
  readonly liveTurns: LiveTurns;
  /** Busy ownership subtrees, for deletes (§6.4). */
  readonly subtrees: LiveSubtrees;
}

export async function validateMainBatch(writes: readonly MainWrite[], ctx: ValidationContext): Promise<void> {
  const { storage } = ctx;
  const created = new Map<Id, Conversation>();
  const batchEntries = new Map<Id, Entry>();
  const turnDelta = new Map<Id, number>(); // live turn tasks created (+) / settled (-) earlier in the batch
  const settledInBatch = new Set<Id>();
  const liveTurnCache = new Map<Id, number>();
  const results = new Map<string, InputResult | undefined>(); // "conversation/input" -> latest in batch
  const removedInputs: { conversationId: Id; inputId: Id }[] = [];
  const requestKeys = new Set<string>(); // request keys mapped earlier in the batch

  for (const write of writes) {
    switch (write.type) {
      case "value.set":
      case "value.delete": {
        const addr = write.addr;
        // §3.4: a request key names one acceptance for the life of the session; it is never remapped.
        if (addr.namespace === REQUEST_NAMESPACE && "session" in addr.scope && addr.key !== undefined) {
          if (requestKeys.has(addr.key) || (await storage.getValue(addr)) !== undefined) {
            throw invalid(
              `request key ${JSON.stringify(addr.key)} already names an acceptance; it is never remapped (read it with acceptance(), §3.4)`,
            );
          }
          requestKeys.add(addr.key);
          break;
        }
        // §8.1/§7.3: input-result transitions are validated; terminal results never change.
        if (addr.namespace !== INPUT_RESULT_NAMESPACE || !("conversation" in addr.scope) || addr.key === undefined)
          break;
        const id = `${addr.scope.conversation}/${addr.key}`;
        const previous = results.has(id) ? results.get(id) : asInputResult((await storage.getValue(addr))?.value);
        if (write.type === "value.delete") {
          if (previous !== undefined) throw invalid(`input ${addr.key}: its result cannot be deleted`);
          break;
        }
        const next = asInputResult(write.value);
        if (next === undefined) throw invalid(`input ${addr.key}: not an input result`);
        checkResultTransition(Number(addr.key), previous, next);
        results.set(id, next);
        break;
      }
      case "list.remove":
        if (write.addr.namespace === INBOX_NAMESPACE && "conversation" in write.addr.scope) {
          removedInputs.push({ conversationId: write.addr.scope.conversation, inputId: write.element });
        }
        break;
      case "createConversation":
        created.set(write.conversation.id, write.conversation);
        break;
      case "task":
        if (write.task.turn && write.task.role !== "terminal") {
          turnDelta.set(write.task.conversationId, (turnDelta.get(write.task.conversationId) ?? 0) + 1);
        }
        break;
      case "settle": {
        if (settledInBatch.has(write.id)) break;
        settledInBatch.add(write.id);
        const task = (await storage.getTasks([write.id])).get(write.id);
        if (task?.turn && task.role !== "terminal") {
          turnDelta.set(task.conversationId, (turnDelta.get(task.conversationId) ?? 0) - 1);
        }
        break;
      }
      case "entry": {
        const entry = write.entry;
        const chain = chainOf(entry.conversationId, created, entry.id);
        const lookup = async (id: Id): Promise<Entry | undefined> =>
          batchEntries.get(id) ?? (await storage.getEntries([id])).get(id);

        // §5.8: model-visible entries from outside a turn wait for the turn boundary.
        if (entry.model !== undefined && entry.model.length > 0 && ctx.origin?.turn !== true) {
          let live = liveTurnCache.get(entry.conversationId);
          if (live === undefined) {
            live = await ctx.liveTurns.liveTurnTasks(entry.conversationId);
            liveTurnCache.set(entry.conversationId, live);
          }
          if (live + (turnDelta.get(entry.conversationId) ?? 0) > 0) {
            throw new PicoError(
              "in_turn",
              `conversation ${entry.conversationId} has a live turn task; a model-visible ${entry.kind} entry from outside the turn must go through tx.write, which queues it for the next boundary (§5.8)`,
            );
          }
        }

        if (entry.head !== undefined) await validateHead(entry, chain, batchEntries, ctx.storage, lookup);
        for (const edit of entry.edits ?? []) {
          const target = await lookup(edit.target);
          if (
            target === undefined ||
            target.id >= entry.id ||
            !(await visibleIn(chain, target, batchEntries, storage))
          ) {
            throw invalid(
              `entry ${entry.id}: edit target ${edit.target} is not an earlier visible entry of conversation ${entry.conversationId}`,
            );
          }
          if (isManagedSystem(target)) {
            const baseline = entry.kind === systemKind.kind && isBaseline(entry);
            if (!(baseline && edit.action === "omit")) {
              throw invalid(
                `entry ${entry.id}: edits of managed system entry ${target.id} are reserved to a fresh baseline's omissions; change instructions through system sections (§2.1, §8.2)`,
              );
            }
          }
        }
        batchEntries.set(entry.id, entry);
        break;
      }
      default:
        break;
    }
  }
  // Consuming or withdrawing an inbox element writes its result in the same batch (§7.3).
  for (const { conversationId, inputId } of removedInputs) {
    const result = results.get(`${conversationId}/${inputId}`);
    if (result === undefined || result.status === "queued") {
      throw invalid(`input ${inputId} left the inbox without its result being written in the same commit (§8.1)`);
    }
  }
  await validateOwnership(writes, storage, ctx.subtrees);
}

function isBaseline(entry: Entry): boolean {
  const data = entry.data;
  return (
    data !== null &&
    typeof data === "object" &&
    !Array.isArray(data) &&
    (data as { baseline?: unknown }).baseline === true
  );
}

async function validateHead(
  entry: Entry,
  chain: Chain,
  batchEntries: ReadonlyMap<Id, Entry>,
  storage: Storage,
  lookup: (id: Id) => Promise<Entry | undefined>,
): Promise<void> {
  const head = entry.head as Id;
  if (head !== entry.id) {
    const target = await lookup(head);
    if (target === undefined || !(await visibleIn(chain, target, batchEntries, storage))) {
      throw invalid(`entry ${entry.id}: head ${head} is not a visible entry of conversation ${entry.conversationId}`);
    }
  }
  // Committed entries are read from the nearest segment storage knows: conversations created in this
  // batch have no committed entries, and storage reads of that committed ancestor apply its own cutoffs.
  const committed = chain.committed;
  // The previous visible head: committed, or earlier in this batch in the same logical transcript.
  let previous: Entry | undefined;
  for (const e of batchEntries.values()) {
    if (e.head !== undefined && visibleInBatch(chain, e) && (previous === undefined || e.id > previous.id))
      previous = e;
  }
  if (previous === undefined && committed !== undefined && storage.lastSeq > 0) {
    previous = await storage.newestHead(committed.conversationId, Math.min(storage.lastSeq, committed.cap));
  }
  if (previous?.head !== undefined && head < previous.head) {
    throw invalid(
      `entry ${entry.id}: head ${head} would move context back before the previous head's boundary ${previous.head} (§2.1)`,
    );
  }
  // The boundary must not split a tool exchange: the newest assistant with calls before the boundary
  // must have all its results before the boundary too.
  let assistant: Entry | undefined;
  for (const e of batchEntries.values()) {
    if (
      e.kind === "assistant" &&
      e.id < head &&
      visibleInBatch(chain, e) &&
      (assistant === undefined || e.id > assistant.id)
    )
      assistant = e;
  }
  if (assistant === undefined && committed !== undefined && storage.lastSeq > 0) {
    const page = await storage.scanEntries({
      conversationId: committed.conversationId,
      kind: "assistant",
      through: committed.cap,
      before: head,
      limit: 1,
    });
    assistant = page.items[0];
  }
  const calls = assistant === undefined ? undefined : toolCallIds(assistant);
  if (assistant === undefined || calls === undefined || calls.length === 0) return;
  for (const callId of calls) {
    let answered = false;
    for (const e of batchEntries.values()) {
      if (e.kind === "tool_result" && e.key === callId && e.id < head && visibleInBatch(chain, e)) answered = true;
    }
    if (!answered && committed !== undefined && storage.lastSeq > 0) {
      const page = await storage.scanEntries({
        conversationId: committed.conversationId,
        kind: "tool_result",
        key: callId,
        through: committed.cap,
        before: head,
        limit: 1,
      });
      answered = page.items.length > 0;
    }
    if (!answered) {
      throw invalid(
        `entry ${entry.id}: head ${head} splits the tool exchange of assistant ${assistant.id} (call ${callId} has no result before it) (§2.1)`,
      );
    }
  }
}
