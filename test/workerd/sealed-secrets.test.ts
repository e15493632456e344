/**
 * Sealed secrets (src/worker/crypto/sealed-secrets.ts): a secret sealed for a context opens for that context
 * only; a tampered blob does not open; after a rotation what the previous key sealed still opens and
 * new seals use the new key; a missing key is `misconfigured`; the plaintext never shows in the blob
 * or in an error.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { Env } from "../../src/worker/env.js";
import { Problem } from "../../src/worker/problems.js";
import { openSecret, sealSecret, type SealContext, type SealedSecret } from "../../src/worker/crypto/sealed-secrets.js";

const KEY_A = "test-only-sealing-key-A-0123456789abcdef";
const KEY_B = "test-only-sealing-key-B-0123456789abcdef";
const PLAINTEXT = "It's a Secret to Everybody";
const context: SealContext = { tenant: "acme", owner: "inbound:support/github", field: "secret" };

function withKeys(current: string | undefined, previous?: string): Env {
  const base = env as unknown as Env;
  return { ...base, SECRETS_SEALING_KEY: current, SECRETS_SEALING_KEY_PREVIOUS: previous } as Env;
}

async function problemOf(promise: Promise<unknown>): Promise<Problem> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof Problem) return error;
    throw error;
  }
  throw new Error("expected a Problem");
}

/** The blob with one base64 field's first byte flipped. */
function flipped(sealed: SealedSecret, field: "iv" | "ct"): SealedSecret {
  const bytes = Uint8Array.from(atob(sealed[field]), (char) => char.charCodeAt(0));
  bytes[0] = (bytes[0] ?? 0) ^ 1;
  return { ...sealed, [field]: btoa(String.fromCharCode(...bytes)) };
}

describe("sealed secrets", () => {
  it("round-trips a secret for its context, with a fresh iv each time", async () => {
    const keys = withKeys(KEY_A);
    const one = await sealSecret(keys, context, PLAINTEXT);
    const two = await sealSecret(keys, context, PLAINTEXT);
    expect(one.v).toBe(1);
    expect(one.kid).toMatch(/^[0-9a-f]{8}$/);
    expect(two.kid).toBe(one.kid);
    expect(two.iv).not.toBe(one.iv);
    expect(two.ct).not.toBe(one.ct);
    expect(await openSecret(keys, context, one)).toBe(PLAINTEXT);
    expect(await openSecret(keys, context, two)).toBe(PLAINTEXT);
    expect(await openSecret(keys, context, await sealSecret(keys, context, "ünïcødé ✓ 🔑"))).toBe("ünïcødé ✓ 🔑");
  });

  it("opens with the test configuration's key (vitest.config.ts binds SECRETS_SEALING_KEY)", async () => {
    const base = env as unknown as Env;
    expect(await openSecret(base, context, await sealSecret(base, context, PLAINTEXT))).toBe(PLAINTEXT);
  });

  it("does not open for another tenant, owner or field", async () => {
    const keys = withKeys(KEY_A);
    const sealed = await sealSecret(keys, context, PLAINTEXT);
    for (const other of [
      { ...context, tenant: "globex" },
      { ...context, owner: "inbound:support/slack" },
      { ...context, field: "token" },
    ]) {
      const problem = await problemOf(openSecret(keys, other, sealed));
      expect(problem.code).toBe("misconfigured");
      expect(problem.detail).toBe("a sealed secret does not open with the configured keys");
    }
  });

  it("does not open when its ciphertext or iv is tampered with, or its kid or version is unknown", async () => {
    const keys = withKeys(KEY_A);
    const sealed = await sealSecret(keys, context, PLAINTEXT);
    const tampered: SealedSecret[] = [
      flipped(sealed, "ct"),
      flipped(sealed, "iv"),
      { ...sealed, ct: sealed.ct.slice(0, -8) },
      { ...sealed, iv: "not base64!" },
      { ...sealed, kid: "00000000" },
      { ...sealed, v: 2 } as unknown as SealedSecret,
    ];
    for (const blob of tampered) expect((await problemOf(openSecret(keys, context, blob))).code).toBe("misconfigured");
  });

  it("rotates: what key A sealed opens while A is the previous key and B the current one; new seals use B", async () => {
    const before = withKeys(KEY_A);
    const old = await sealSecret(before, context, PLAINTEXT);
    const rotated = withKeys(KEY_B, KEY_A);
    expect(await openSecret(rotated, context, old)).toBe(PLAINTEXT);
    const fresh = await sealSecret(rotated, context, PLAINTEXT);
    expect(fresh.kid).not.toBe(old.kid);
    expect(await openSecret(withKeys(KEY_B), context, fresh)).toBe(PLAINTEXT);
    // Once A is removed, what it sealed no longer opens; B alone never opened A's blob.
    expect((await problemOf(openSecret(withKeys(KEY_B), context, old))).code).toBe("misconfigured");
    // A as the current key does not open what B sealed without B configured.
    expect((await problemOf(openSecret(before, context, fresh))).code).toBe("misconfigured");
  });

  it("a missing or short key is misconfigured, naming the secret to set", async () => {
    for (const keys of [withKeys(undefined), withKeys(""), withKeys("too-short")]) {
      const sealing = await problemOf(sealSecret(keys, context, PLAINTEXT));
      expect(sealing.code).toBe("misconfigured");
      expect(sealing.status).toBe(500);
      expect(sealing.detail).toContain("SECRETS_SEALING_KEY is not set");
      const sealed = await sealSecret(withKeys(KEY_A), context, PLAINTEXT);
      expect((await problemOf(openSecret(keys, context, sealed))).detail).toContain("SECRETS_SEALING_KEY is not set");
    }
    const shortPrevious = await problemOf(
      openSecret(withKeys(KEY_B, "short"), context, await sealSecret(withKeys(KEY_A), context, PLAINTEXT)),
    );
    expect(shortPrevious.detail).toContain("SECRETS_SEALING_KEY_PREVIOUS is not set");
  });

  it("nothing of the plaintext or the key appears in the sealed blob or in errors", async () => {
    const keys = withKeys(KEY_A);
    const sealed = await sealSecret(keys, context, PLAINTEXT);
    const blob = JSON.stringify(sealed);
    expect(Object.keys(sealed).sort()).toEqual(["ct", "iv", "kid", "v"]);
    for (const fragment of ["Secret", "Everybody", btoa(PLAINTEXT).slice(0, 12), KEY_A.slice(0, 12)])
      expect(blob).not.toContain(fragment);
    const failures = [
      await problemOf(openSecret(keys, { ...context, field: "other" }, sealed)),
      await problemOf(openSecret(withKeys(KEY_B), context, sealed)),
      await problemOf(openSecret(keys, context, flipped(sealed, "ct"))),
    ];
    for (const problem of failures) {
      const text = `${problem.message} ${JSON.stringify(problem.body())}`;
      for (const fragment of ["Secret", "Everybody", KEY_A, KEY_B]) expect(text).not.toContain(fragment);
    }
  });
});
