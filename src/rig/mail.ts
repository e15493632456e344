/**
 * Rig mail (seed 002's durable channel; docs/rig.md): every agent, the mayor and the witness have a
 * mailbox, an append-only list of immutable messages; an acknowledgement is a separate record, so a
 * message never changes. Who may read and send is access.ts's; the `Rig` (rig.ts) offers these as
 * `mail`, `mailbox`, `send` and `ack`. Nudges, the non-durable channel, are nudges.ts.
 */
import { BACKGROUND_CONTEXT, type Call } from "../core/call.js";
import type { Harness } from "../core/harness.js";
import { bind } from "../core/state.js";
import type { Id } from "../storage/records.js";
import { checkActor, checkAgentId, checkMailbox, ownMailbox, senderOf } from "./access.js";
import { RigError } from "./errors.js";
import { iso } from "./hooks.js";
import { agentValue, mailAck, mailbox, readValue } from "./state.js";
import {
  actorName,
  MAYOR_ID,
  WITNESS_ID,
  type Actor,
  type MailAck,
  type MailMessage,
  type MailPayload,
  type StoredMail,
} from "./types.js";

const call: Call = BACKGROUND_CONTEXT;

export interface MailView extends MailMessage {
  readonly ack?: MailAck;
}

/** A page of a mailbox: its messages in order, and the cursor of the next page while more remain. */
export interface MailPage {
  readonly messages: readonly MailView[];
  readonly next?: Id;
}

/** The largest mailbox page (and the default). */
export const MAIL_PAGE = 1000;

/**
 * A page of a mailbox as `actor` may read it (an agent its own; the mayor and operators the mayor's or
 * any), by cursor: the messages after `after`, at most `limit` (1-1,000, default 1,000).
 */
export async function readMail(
  harness: Harness,
  actor: Actor,
  owner?: string,
  query: { readonly after?: Id; readonly limit?: number } = {},
): Promise<MailPage> {
  const box = owner ?? ownMailbox(actor);
  checkMailbox(actor, box);
  const limit = query.limit ?? MAIL_PAGE;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAIL_PAGE)
    throw new RigError("rig_invalid", `limit is an integer from 1 to ${MAIL_PAGE}`, "limit");
  const list = await harness.storage.readList(bind(mailbox(box), {}), { after: query.after ?? 0, limit });
  const messages: MailView[] = [];
  for (const element of list.items)
    messages.push(mailView(element.id, element.value, await readValue(harness.storage, mailAck(box, element.id))));
  return { messages, ...(list.next === undefined ? {} : { next: list.next }) };
}

/** Every message of a mailbox, page by page, without acks (the `.chipset/state` export). */
export async function* mailboxMessages(harness: Harness, box: string): AsyncGenerator<MailMessage> {
  let after: Id = 0;
  for (;;) {
    const list = await harness.storage.readList(bind(mailbox(box), {}), { after, limit: MAIL_PAGE });
    for (const element of list.items) yield mailView(element.id, element.value, undefined);
    if (list.next === undefined) return;
    after = list.next;
  }
}

/** Send durable mail (`to`: an agent id, `mayor` or `witness`). */
export async function sendMail(harness: Harness, actor: Actor, to: string, payload: MailPayload): Promise<MailMessage> {
  checkActor(actor);
  const sender = senderOf(actor);
  if (to !== MAYOR_ID && to !== WITNESS_ID) checkAgentId(to, "to");
  return harness.commit(async (tx) => {
    if (to !== MAYOR_ID && to !== WITNESS_ID && (await tx.value(agentValue(to)).get()) === undefined)
      throw new RigError("agent_not_found", `agent ${to} is not registered`, "to");
    const message: Omit<MailMessage, "id"> = {
      from: actorName(actor),
      to,
      channel: "mail",
      payload,
      timestamp: iso(harness.now()),
      durable: true,
    };
    const id = tx.list(mailbox(to)).append({ ...message, sender });
    return { id, ...message };
  }, call);
}

/** Acknowledge a message of one's own mailbox: a separate record; the message never changes. */
export async function ackMail(harness: Harness, actor: Actor, id: Id): Promise<MailView> {
  const box = ownMailbox(actor);
  return harness.commit(async (tx) => {
    const page = await tx.list(mailbox(box)).read({ after: id - 1, limit: 1 });
    const element = page.items[0];
    if (element === undefined || element.id !== id)
      throw new RigError("mail_not_found", `mailbox ${box} has no message ${id}`);
    const prior = await tx.value(mailAck(box, id)).get();
    if (prior !== undefined) return mailView(id, element.value, prior);
    const ack: MailAck = { by: actorName(actor), at: iso(harness.now()) };
    tx.value(mailAck(box, id)).set(ack);
    return mailView(id, element.value, ack);
  }, call);
}

/** A stored message as callers see it: its id, the document's fields, its ack; the sender's role stays inside. */
function mailView(id: Id, stored: StoredMail, ack: MailAck | undefined): MailView {
  const { sender: _sender, ...message } = stored;
  return { id, ...message, ...(ack === undefined ? {} : { ack }) };
}
