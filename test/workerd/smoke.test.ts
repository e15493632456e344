import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";

describe("smoke", () => {
  it("reaches a SQLite-backed SessionObject", async () => {
    const stub = env.SESSIONS.get(env.SESSIONS.idFromName("smoke"));
    expect(await stub.ping()).toBe(1);
  });
});
