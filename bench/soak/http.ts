import type { Fleet, Replica } from './fleet.js';
import type { SeededRandom } from './rng.js';

/** A request that never answered: a dead or frozen replica, or a dropped connection. */
export const NO_ANSWER = -1;

/** One HTTP answer; `status` is {@link NO_ANSWER} when there was none. */
export interface Answer {
  readonly status: number;
  // biome-ignore lint/suspicious/noExplicitAny: JSON answers of the service
  readonly body: any;
  readonly replica: number;
}

/** Sends one request to a live replica the random source picks (none live: no answer). */
export async function call(
  fleet: Fleet,
  random: SeededRandom,
  method: string,
  route: string,
  options: { json?: unknown; raw?: { body: Uint8Array; type: string; headers?: Record<string, string> }; timeoutMs: number },
): Promise<Answer> {
  const live = fleet.live();
  if (live.length === 0) return { status: NO_ANSWER, body: { error: { code: 'NO_REPLICA' } }, replica: -1 };
  const replica: Replica = random.pick(live);
  const headers: Record<string, string> = { authorization: `Bearer ${fleet.token}` };
  let body: string | Uint8Array | undefined;
  if (options.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(options.json);
  } else if (options.raw !== undefined) {
    headers['content-type'] = options.raw.type;
    Object.assign(headers, options.raw.headers ?? {});
    body = options.raw.body;
  }
  try {
    const response = await fetch(`${replica.url}${route}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
      signal: AbortSignal.timeout(options.timeoutMs),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // a raw download
    }
    return { status: response.status, body: parsed, replica: replica.index };
  } catch (error) {
    return { status: NO_ANSWER, body: { error: { code: 'NO_ANSWER', message: String(error) } }, replica: replica.index };
  }
}
