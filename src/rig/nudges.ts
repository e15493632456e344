/**
 * Nudges (seed 002's non-durable channel): delivered live and never stored. A conversation
 * agent's nudges go to whoever the host registered as that conversation's live sink (its watchers); an
 * external agent receives the nudges sent since it last asked while it is listening
 * (`GET .../rig/nudges?wait=`). A nudge nobody is listening for is lost, as the document says; the
 * witness's own count of nudges sent is durable (witness.ts).
 */
import type { Nudge } from "./types.js";

interface Listener {
  readonly buffer: Nudge[];
  waiter: (() => void) | undefined;
}

export class NudgeBus {
  /** External agents that have asked at least once since this instance started. */
  readonly #listeners = new Map<string, Listener>();
  #live: ((conversationId: number, nudge: Nudge) => boolean) | undefined;
  #delivered = 0;
  #lost = 0;

  /** The host's live sink for conversation agents' watchers (returns whether anyone received it). */
  setLiveSink(sink: (conversationId: number, nudge: Nudge) => boolean): void {
    this.#live = sink;
  }

  /** Deliver a nudge now (to a conversation agent's watchers when it has a conversation), or lose it. */
  send(nudge: Nudge, conversationId?: number): boolean {
    const listener = this.#listeners.get(nudge.to);
    let received = false;
    if (listener !== undefined) {
      listener.buffer.push(nudge);
      if (listener.buffer.length > 100) listener.buffer.shift();
      const waiter = listener.waiter;
      listener.waiter = undefined;
      waiter?.();
      received = true;
    }
    if (conversationId !== undefined && this.#live?.(conversationId, nudge) === true) received = true;
    if (received) this.#delivered += 1;
    else this.#lost += 1;
    return received;
  }

  /** The nudges sent to `agentId` since it last asked; waits up to `waitMs` for one when there are none. */
  async take(agentId: string, waitMs: number): Promise<Nudge[]> {
    let listener = this.#listeners.get(agentId);
    if (listener === undefined) {
      listener = { buffer: [], waiter: undefined };
      this.#listeners.set(agentId, listener);
    }
    if (listener.buffer.length === 0 && waitMs > 0) {
      const current = listener;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          if (current.waiter === done) current.waiter = undefined;
          resolve();
        }, waitMs);
        const done = (): void => {
          clearTimeout(timer);
          resolve();
        };
        // A second poll replaces the first: the earlier one answers now with nothing.
        current.waiter?.();
        current.waiter = done;
      });
    }
    return listener.buffer.splice(0);
  }

  get stats(): { readonly delivered: number; readonly lost: number } {
    return { delivered: this.#delivered, lost: this.#lost };
  }
}
