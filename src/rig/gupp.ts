/**
 * GUPP for conversation agents (seed 000 "GUPP Integration", issue 13, DESIGN §8): the host side that
 * keeps the Rig's GUPP commits coming. It observes commits (observing only: every decision is re-made
 * inside the Rig's own commit on the line) and schedules:
 *
 *   - activation of a pending hook once its conversation has no live turn (the hook is a durable
 *     assignment, so re-checking pending hooks when the session opens is not work by inference);
 *   - completion of an active hook whose input's result became `done` without the hook completing in
 *     that commit, in the next commit keyed by that input (a restart in between loses nothing: open
 *     re-checks active hooks whose input is answered). With the session's turn kit this is only a
 *     fallback: the kit's final-answer extension point lets `Rig.atFinalAnswer` complete the hook in the
 *     commit that records the `done` result, and place a pending hook's work item ahead of queued
 *     followUps there. A failed or aborted answer leaves the hook `active` for the witness and the mayor;
 *   - a throttled touch of `last_activity` for commits of the agent's conversation (never per token:
 *     previews are not commits, and the touch writes at most once per throttle window).
 */
import { INPUT_RESULT_NAMESPACE } from "../core/inbox.js";
import type { CommittedBatch } from "../core/harness.js";
import { bind } from "../core/state.js";
import type { Rig } from "./rig.js";
import { agentIndex, HOOK_NAMESPACE, hookValue } from "./state.js";
import type { StoredHook } from "./types.js";

export class Gupp {
  readonly #rig: Rig;
  readonly #report: (error: unknown) => void;
  /** conversation id -> agent id, for conversation agents. */
  readonly #agents = new Map<number, string>();
  /** Agents whose hook is pending. */
  readonly #pending = new Set<string>();
  /** inputId -> agent whose active hook waits for that input's answer. */
  readonly #awaiting = new Map<number, string>();
  readonly #lastTouch = new Map<string, number>();
  #running = false;
  #again = false;
  #opened = false;

  constructor(rig: Rig, report: (error: unknown) => void = () => undefined) {
    this.#rig = rig;
    this.#report = report;
  }

  /**
   * On open (when the session is attached: at its open, or when an operator clears its fault): learn the
   * conversation agents and re-check their hooks; then follow commits. A second call does nothing.
   */
  async open(): Promise<void> {
    if (this.#opened) return;
    this.#opened = true;
    const storage = this.#rig.harness.storage;
    const index = (await storage.getValue(bind(agentIndex, {})))?.value ?? {};
    for (const [agentId, entry] of Object.entries(index)) {
      if (entry.conversationId === undefined) continue;
      this.#agents.set(entry.conversationId, agentId);
      const stored = (await storage.getValue(bind(hookValue(agentId), {})))?.value;
      if (stored !== undefined) this.#learn(agentId, stored);
    }
    this.#rig.harness.onCommit((commit) => this.#observe(commit));
    for (const [inputId, agentId] of [...this.#awaiting]) void this.#complete(agentId, inputId);
    this.#kick();
  }

  #learn(agentId: string, stored: StoredHook): void {
    if (stored.file.status === "pending") this.#pending.add(agentId);
    else this.#pending.delete(agentId);
    for (const [inputId, id] of this.#awaiting) if (id === agentId) this.#awaiting.delete(inputId);
    if (stored.file.status === "active" && stored.input !== undefined) this.#awaiting.set(stored.input.inputId, agentId);
  }

  #observe(commit: CommittedBatch): void {
    if (commit.batch.kind !== "main") return;
    const touched = new Set<string>();
    const answered: number[] = [];
    for (const write of commit.batch.writes) {
      if (write.type === "value.set" && write.addr.namespace === "rig.agents") {
        for (const [agentId, entry] of Object.entries(write.value as Record<string, { conversationId?: number }>)) {
          if (entry.conversationId !== undefined) this.#agents.set(entry.conversationId, agentId);
        }
      } else if (write.type === "value.set" && write.addr.namespace === HOOK_NAMESPACE && write.addr.key !== undefined) {
        this.#learn(write.addr.key, write.value as unknown as StoredHook);
      } else if (write.type === "value.set" && write.addr.namespace === INPUT_RESULT_NAMESPACE && write.addr.key !== undefined) {
        if ((write.value as { status?: unknown }).status === "done") answered.push(Number(write.addr.key));
      } else if (write.type === "entry") {
        const agentId = this.#agents.get(write.entry.conversationId);
        if (agentId !== undefined) touched.add(agentId);
      }
    }
    // After the hook writes of the same commit are learned: a hook completed in the answer's own commit
    // no longer awaits, so only an answer that did not complete its hook needs a commit of its own.
    for (const inputId of answered) {
      const agentId = this.#awaiting.get(inputId);
      if (agentId !== undefined) void this.#complete(agentId, inputId);
    }
    const now = this.#rig.now();
    for (const agentId of touched) {
      // Skip what the in-commit throttle would refuse anyway (a default window of 30 s).
      if (now - (this.#lastTouch.get(agentId) ?? 0) < 1_000) continue;
      this.#lastTouch.set(agentId, now);
      this.#rig.guppTouch(agentId).catch(this.#report);
    }
    if (this.#pending.size > 0) this.#kick();
  }

  async #complete(agentId: string, inputId: number): Promise<void> {
    try {
      if (await this.#rig.guppComplete(agentId)) this.#awaiting.delete(inputId);
    } catch (error) {
      this.#report(error);
    }
  }

  /** Try the pending hooks whose conversation has no live turn, one activation commit each. */
  #kick(): void {
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = true;
    void (async () => {
      try {
        do {
          this.#again = false;
          for (const agentId of [...this.#pending]) {
            const conversationId = [...this.#agents].find(([, id]) => id === agentId)?.[0];
            if (conversationId === undefined || this.#rig.harness.driver.liveTurnTasks(conversationId) > 0) continue;
            await this.#rig.guppActivate(agentId);
          }
        } while (this.#again);
      } catch (error) {
        this.#report(error);
      } finally {
        this.#running = false;
      }
    })();
  }
}
