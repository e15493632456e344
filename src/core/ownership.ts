/**
 * Ownership rules of commit validation (§5.4, §5.7, §6.4). A conversation's ownership tree is found by
 * walking `conversation.owner` -> the owner task's conversation up to a conversation without an owner;
 * fork provenance is not ownership (§2.5), so a fork starts a tree of its own. Two rules use it:
 *
 * - a dependency (`after`) names a task in the same ownership tree as the new task (§5.4);
 * - a delete rejects while live tasks or outstanding invocations remain in the conversation's subtree,
 *   including tasks the same batch creates there (§6.4). The check is here, not in one entry point, so
 *   every path (Harness.deleteConversation, tx.deleteConversation) gets it.
 *
 * It reads named conversation and task records only (batched point reads, §7.2), never history.
 */
import type { Conversation, Id, MainWrite, Task } from "../storage/records.js";
import type { Storage } from "../storage/storage.js";
import { invalid, PicoError } from "./errors.js";

/** The driver's answer for committed state: live tasks or running invocations in a subtree. */
export interface LiveSubtrees {
  subtreeBusy(conversationId: Id): boolean;
}

/** Ownership ancestry over committed records plus one batch's new conversations and tasks. */
class Ancestry {
  readonly #storage: Storage;
  readonly #conversations: ReadonlyMap<Id, Conversation>;
  readonly #tasks: ReadonlyMap<Id, Task>;
  readonly #up = new Map<Id, Id | undefined>(); // conversation -> its owner task's conversation

  constructor(storage: Storage, conversations: ReadonlyMap<Id, Conversation>, tasks: ReadonlyMap<Id, Task>) {
    this.#storage = storage;
    this.#conversations = conversations;
    this.#tasks = tasks;
  }

  async task(id: Id): Promise<Task | undefined> {
    return this.#tasks.get(id) ?? (await this.#storage.getTasks([id])).get(id);
  }

  /** The owning conversation one level up, if any. A deleted or unknown conversation ends the walk. */
  async #parentOf(conversationId: Id): Promise<Id | undefined> {
    if (this.#up.has(conversationId)) return this.#up.get(conversationId);
    const conversation =
      this.#conversations.get(conversationId) ??
      (await this.#storage.getConversations([conversationId])).get(conversationId);
    const owner = conversation?.owner;
    const up = owner === undefined ? undefined : (await this.task(owner))?.conversationId;
    this.#up.set(conversationId, up);
    return up;
  }

  /** The conversation and its ownership ancestors, nearest first; the last one is the tree's root. */
  async path(conversationId: Id): Promise<Id[]> {
    const path = [conversationId];
    const seen = new Set(path);
    for (
      let up = await this.#parentOf(conversationId);
      up !== undefined && !seen.has(up);
      up = await this.#parentOf(up)
    ) {
      path.push(up);
      seen.add(up);
    }
    return path;
  }

  async root(conversationId: Id): Promise<Id> {
    const path = await this.path(conversationId);
    return path[path.length - 1] as Id;
  }
}

export async function validateOwnership(
  writes: readonly MainWrite[],
  storage: Storage,
  live: LiveSubtrees,
): Promise<void> {
  const conversations = new Map<Id, Conversation>();
  const tasks = new Map<Id, Task>();
  const settled = new Set<Id>();
  const deleted: Id[] = [];
  for (const write of writes) {
    if (write.type === "createConversation") conversations.set(write.conversation.id, write.conversation);
    else if (write.type === "task") tasks.set(write.task.id, write.task);
    else if (write.type === "settle") settled.add(write.id);
    else if (write.type === "deleteConversation") deleted.push(write.id);
  }
  if (deleted.length === 0 && ![...tasks.values()].some((t) => t.after.length > 0)) return;
  const ancestry = new Ancestry(storage, conversations, tasks);

  // §5.4: dependencies reference tasks in the same ownership tree.
  for (const task of tasks.values()) {
    if (task.after.length === 0) continue;
    const root = await ancestry.root(task.conversationId);
    for (const id of task.after) {
      const dependency = await ancestry.task(id);
      if (dependency === undefined) continue; // storage rejects unknown dependencies
      const dependencyRoot = await ancestry.root(dependency.conversationId);
      if (dependencyRoot !== root) {
        throw invalid(
          `task ${task.id} in conversation ${task.conversationId} cannot depend on task ${id} in conversation ${dependency.conversationId}: ` +
            `it is in another ownership tree (rooted at ${dependencyRoot}, not ${root}); dependencies stay in one ownership tree (§5.4)`,
        );
      }
    }
  }

  // §6.4: delete rejects while the subtree has live tasks or outstanding invocations.
  for (const id of deleted) {
    let busy = live.subtreeBusy(id);
    for (const task of tasks.values()) {
      if (busy) break;
      if (task.role === "terminal" || settled.has(task.id)) continue;
      busy = (await ancestry.path(task.conversationId)).includes(id);
    }
    if (busy) {
      throw new PicoError(
        "conflict",
        `conversation ${id} has live tasks or running invocations in its subtree; it can be deleted once they settle (§6.4)`,
      );
    }
  }
}

/**
 * A conversation and every conversation it owns, down the ownership tree (§5.7, §6.4): what a delete
 * removes. Walks the owning tasks' `owns` of each conversation in the tree (paged task scans, then one
 * batched read of the owned records, skipping any already deleted), never fork provenance (§2.5). A
 * delete is rare and reads only the subtree's own tasks.
 */
export async function ownedSubtree(storage: Storage, conversationId: Id): Promise<Id[]> {
  const tree: Id[] = [conversationId];
  const seen = new Set<Id>(tree);
  for (let i = 0; i < tree.length; i++) {
    const owned: Id[] = [];
    let after: Id | undefined;
    for (;;) {
      const page = await storage.scanTasks({
        conversationIds: [tree[i] as Id],
        limit: 1000,
        ...(after === undefined ? {} : { after }),
      });
      for (const task of page.items) for (const id of task.owns ?? []) if (!seen.has(id)) owned.push(id);
      if (page.next === undefined) break;
      after = page.next;
    }
    if (owned.length === 0) continue;
    const records = await storage.getConversations(owned);
    for (const id of owned) {
      if (seen.has(id) || !records.has(id)) continue;
      seen.add(id);
      tree.push(id);
    }
  }
  return tree;
}
