/**
 * Sealed secrets: a secret the operator gives us (an inbound endpoint's signing secret, ...) is stored
 * sealed, never in the clear. AES-GCM-256 with a key derived by HKDF-SHA-256 from the wrangler secret
 * `SECRETS_SEALING_KEY` (at least 32 characters); the context (tenant, owner, field) is bound as the
 * additional data, so a blob copied to another tenant, owner or field does not open.
 *
 * Rotation (docs/operations.md "Configuration and secrets"): set the new key as `SECRETS_SEALING_KEY` and
 * the old one as `SECRETS_SEALING_KEY_PREVIOUS`. New seals use the current key; a blob names its key by
 * `kid` (the first 8 hex digits of SHA-256 of the derived key), and opening picks the key with that kid.
 * Once every blob has been sealed again, `SECRETS_SEALING_KEY_PREVIOUS` can be removed.
 *
 * Errors never carry the plaintext or the key: a missing key and a blob that does not open are both
 * 500 `misconfigured` with a fixed detail.
 */
import type { Env } from "../env.js";
import { Problem } from "../problems.js";
import { base64, unbase64 } from "./base64.js";

/** A sealed value as stored (JSON-safe): base64 `iv` and `ct` (ciphertext with the GCM tag). */
export interface SealedSecret {
  readonly v: 1;
  readonly kid: string;
  readonly iv: string;
  readonly ct: string;
}

/** What a sealed value belongs to; all three must match for it to open. */
export interface SealContext {
  readonly tenant: string;
  readonly owner: string;
  readonly field: string;
}

/** The shortest key accepted (characters of SECRETS_SEALING_KEY). */
export const SEALING_KEY_MIN_LENGTH = 32;

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const HKDF_SALT = encoder.encode("pico-edge sealed secrets");
const HKDF_INFO = encoder.encode("pico-edge sealed v1 aes-gcm-256");

interface SealingKey {
  readonly kid: string;
  readonly key: CryptoKey;
}

/** Derived keys by source text (the derivation is deterministic; the isolate keeps them). */
const derived = new Map<string, Promise<SealingKey>>();

function hex(bytes: ArrayBuffer): string {
  return Array.from(new Uint8Array(bytes), (byte) => byte.toString(16).padStart(2, "0")).join("");
}

async function derive(source: string): Promise<SealingKey> {
  const material = await crypto.subtle.importKey("raw", encoder.encode(source), "HKDF", false, ["deriveBits"]);
  const bits = await crypto.subtle.deriveBits(
    { name: "HKDF", hash: "SHA-256", salt: HKDF_SALT, info: HKDF_INFO },
    material,
    256,
  );
  const kid = hex(await crypto.subtle.digest("SHA-256", bits)).slice(0, 8);
  const key = await crypto.subtle.importKey("raw", bits, { name: "AES-GCM" }, false, ["encrypt", "decrypt"]);
  return { kid, key };
}

function sealingKey(source: string): Promise<SealingKey> {
  let key = derived.get(source);
  if (key === undefined) {
    key = derive(source);
    derived.set(source, key);
  }
  return key;
}

function notSet(name: string): Problem {
  return new Problem(
    "misconfigured",
    `${name} is not set (wrangler secret put ${name}; .dev.vars in development; at least ${SEALING_KEY_MIN_LENGTH} characters)`,
  );
}

/** The current key and, when set, the previous one. */
function keySources(env: Env): { readonly current: string; readonly previous: string | undefined } {
  const current = env.SECRETS_SEALING_KEY;
  if (current === undefined || current.length < SEALING_KEY_MIN_LENGTH) throw notSet("SECRETS_SEALING_KEY");
  const previous = env.SECRETS_SEALING_KEY_PREVIOUS;
  if (previous === undefined || previous === "") return { current, previous: undefined };
  if (previous.length < SEALING_KEY_MIN_LENGTH) throw notSet("SECRETS_SEALING_KEY_PREVIOUS");
  return { current, previous };
}

function additionalData(context: SealContext): Uint8Array {
  return encoder.encode(`pico-edge sealed v1|${context.tenant}|${context.owner}|${context.field}`);
}

function doesNotOpen(): Problem {
  return new Problem("misconfigured", "a sealed secret does not open with the configured keys");
}

/** Seal `plaintext` for `context` with the current key. */
export async function sealSecret(env: Env, context: SealContext, plaintext: string): Promise<SealedSecret> {
  const { kid, key } = await sealingKey(keySources(env).current);
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const ct = await crypto.subtle.encrypt(
    { name: "AES-GCM", iv, additionalData: additionalData(context) },
    key,
    encoder.encode(plaintext),
  );
  return { v: 1, kid, iv: base64(iv), ct: base64(new Uint8Array(ct)) };
}

/** Open a sealed value for `context` with the key its kid names (current or previous). */
export async function openSecret(env: Env, context: SealContext, sealed: SealedSecret): Promise<string> {
  const { current, previous } = keySources(env);
  const candidates = [current, ...(previous === undefined ? [] : [previous])];
  let match: SealingKey | undefined;
  for (const source of candidates) {
    const key = await sealingKey(source);
    if (key.kid === sealed.kid) {
      match = key;
      break;
    }
  }
  if (match === undefined || sealed.v !== 1) throw doesNotOpen();
  try {
    const iv = unbase64(sealed.iv);
    if (iv.length !== 12) throw doesNotOpen();
    const plain = await crypto.subtle.decrypt(
      { name: "AES-GCM", iv, additionalData: additionalData(context) },
      match.key,
      unbase64(sealed.ct),
    );
    return decoder.decode(plain);
  } catch {
    throw doesNotOpen();
  }
}
