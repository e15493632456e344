/**
 * Where a session object reads its tenant's profiles (session/profiles.ts): the tenant's DirectoryObject,
 * named by the session's directory link. Kept apart from profiles.ts so that module stays free of the
 * Workers runtime (the turn-kit tests use it directly).
 */
import type { Clock } from "../../core/host.js";
import { directoryStub } from "../directory/object.js";
import type { Env } from "../env.js";
import { hostReport } from "../platform/host-config.js";
import { ProfileCache } from "./profiles.js";

/** A session object's profile copy: it reads its tenant's DirectoryObject (`tenant`: from the directory link). */
export function sessionProfiles(env: Env, clock: Clock, tenant: () => string | undefined): ProfileCache {
  const stub = (): ReturnType<typeof directoryStub> | undefined => {
    const name = tenant();
    return name === undefined ? undefined : directoryStub(env, name);
  };
  return new ProfileCache(
    {
      latest: (name) => stub()?.getProfile(name),
      version: (name, version) => stub()?.getProfileVersion(name, version),
    },
    clock,
    (error) => hostReport({ type: "profile_read_failed", error }),
  );
}
