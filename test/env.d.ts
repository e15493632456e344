declare namespace Cloudflare {
  interface Env {
    SESSIONS: DurableObjectNamespace<import("../src/worker/session-object.js").SessionObject>;
  }
}
