/**
 * The Hono environment every server module shares, so route files, middleware and the
 * error handler agree on what `c.get(...)` holds.
 */
import type { Principal } from './auth.js';

/**
 * Per-request variables. `requestId` is set by `requestLogger` on every request;
 * `principal` only after `bearerAuth` accepted a token, so public routes must not read it.
 */
export type AppEnv = {
  Variables: {
    principal: Principal;
    requestId: string;
  };
};
