/**
 * The witness as the mayor and operators manage it (seed 002 "Witness observer"; docs/rig.md): its
 * settings, read and patched (a patch wakes a sleeping patrol so a shorter interval applies at once), and
 * the health report, read-only, assessed as a patrol would now. The `Rig` (rig.ts) offers these as
 * `settings`, `patchSettings` and `health`; the patrol itself, and the assessment, are witness.ts.
 */
import { BACKGROUND_CONTEXT, type Call } from "../core/call.js";
import type { Harness } from "../core/harness.js";
import { bind, type ValueSpec } from "../core/state.js";
import { RigError } from "./errors.js";
import { mailbox, readValue, scanAgents, settingsValue, witnessFocus, witnessTask } from "./state.js";
import { DEFAULT_SETTINGS, WITNESS_ID, type Actor, type RigHealth, type RigSettings } from "./types.js";
import { assess, readSettings, unreadReplies } from "./witness.js";

const call: Call = BACKGROUND_CONTEXT;

/** The settings in force: the chosen ones over the defaults. */
export async function witnessSettings(harness: Harness): Promise<RigSettings> {
  return { ...DEFAULT_SETTINGS, ...((await readValue(harness.storage, settingsValue)) ?? {}) };
}

/** Change the witness's settings (mayor or operator); answers the settings in force. */
export async function patchWitnessSettings(
  harness: Harness,
  actor: Actor,
  patch: Partial<RigSettings>,
): Promise<RigSettings> {
  if (actor.role !== "mayor" && actor.role !== "operator")
    throw new RigError(
      "rig_forbidden",
      `only the mayor or an operator configures the witness (this token's role is ${actor.role})`,
    );
  const { settings, witness } = await harness.commit(async (tx) => {
    const current = (await tx.value(settingsValue).get()) ?? {};
    const next = { ...current, ...patch };
    tx.value(settingsValue).set(next);
    return { settings: { ...DEFAULT_SETTINGS, ...next }, witness: await tx.value(witnessTask).get() };
  }, call);
  // A shorter patrol interval applies at once: the witness's sleep ends and it re-plans in its own
  // commit (the host never patches the witness's task, §6.1).
  if (witness !== undefined && patch.patrolIntervalMs !== undefined) await harness.driver.interruptSleep(witness);
  return settings;
}

/**
 * The witness document's RigHealthReport (plus pending and not-started agents), read-only; `rig.name` is its `rigName`.
 */
export async function rigHealth(rig: { readonly harness: Harness; readonly name: string }): Promise<RigHealth> {
  const reader = {
    get: <T>(spec: ValueSpec<T>) => readValue(rig.harness.storage, spec),
    agents: () => scanAgents(rig.harness.storage),
  };
  const settings = await readSettings(reader);
  // Replies the witness has not read yet count as activity too (it records them at its next patrol).
  const replies = await unreadReplies(
    reader,
    async (after) => (await rig.harness.storage.readList(bind(mailbox(WITNESS_ID), {}), { after, limit: 1000 })).items,
  );
  return (await assess(reader, rig.harness.now(), rig.name, settings, replies, await reader.get(witnessFocus))).health;
}
