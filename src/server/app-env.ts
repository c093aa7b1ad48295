/**
 * The Hono environment every server module shares, so route files, middleware and the
 * error handler agree on what `c.get(...)` holds.
 */
import type { Principal } from './auth.js';
import type { Logger } from './logger.js';

/**
 * Per-request variables. `requestId` is set by `requestLogger` on every request;
 * `principal` only after `bearerAuth` accepted a token, so public routes must not read it.
 * `log` is the server's logger with the request id bound, set by `requestLogger` too.
 */
export type AppEnv = {
  Variables: {
    principal: Principal;
    requestId: string;
    log: Logger;
  };
};
