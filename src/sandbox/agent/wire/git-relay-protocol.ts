/**
 * The git relay's frames (both sides): the in-sandbox relay (`--git-relay`) carries byte
 * streams of connections made to its socket to the host and back, in the agent's frame format
 * (`frame-codec.ts`). It knows nothing of HTTP or git: the host parses and judges every byte.
 *
 * Inside to host: `{t: 'ready'}` once it listens; `{t: 'open', c}` for a new connection;
 * `{t: 'data', c}` + bytes; `{t: 'end', c}` when the connection's writer ended.
 * Host to inside: `{t: 'data', c}` + bytes; `{t: 'end', c}` (no more bytes for it);
 * `{t: 'close', c}` (drop the connection now).
 */

/** The largest payload of one relay data frame (the sender cuts bigger chunks). */
export const MAX_RELAY_CHUNK_BYTES = 64 * 1024;

/** Frame kinds of the relay. */
export type RelayFrameKind = 'ready' | 'open' | 'data' | 'end' | 'close';

/** The header of one relay frame. */
export interface RelayHeader {
  readonly t: RelayFrameKind;
  /** The connection, numbered by the relay from 1 (absent on `ready`). */
  readonly c?: number;
}

/** The flag that starts the staged agent as the git relay. */
export const GIT_RELAY_FLAG = '--git-relay';
/** The flag that starts the staged agent as git's `git-remote-holdfast` helper. */
export const GIT_REMOTE_FLAG = '--git-remote';
/** The URL scheme git hands to `git-remote-holdfast`: `holdfast://<binding name>`. */
export const GIT_REMOTE_SCHEME = 'holdfast';
/** The relay's socket, beside the agent's state in `<home>/.holdfast/`. */
export const GIT_RELAY_SOCKET = 'git-relay.sock';
