import type { Selectable } from 'kysely';
import { ConflictError, NotFoundError } from '../../errors.js';
import type { RunEventsTable, TurnStatus, TurnsTable } from '../schema.js';
import {
  fromJsonText,
  type JsonObject,
  newId,
  type RecordedError,
  type RepoContext,
  recordedErrorFromText,
  requireCount,
  requireText,
  toJsonText,
} from './repo-context.js';

/** One turn of a run. */
export interface Turn {
  readonly id: string;
  readonly runId: string;
  /** 1 for the run's first turn. */
  readonly seq: number;
  /** The lease epoch the turn ran under. */
  readonly epoch: number;
  readonly owner: string;
  readonly status: TurnStatus;
  /** The ready checkpoint that completed the turn (set exactly when completed). */
  readonly checkpointId: string | null;
  readonly error: RecordedError | null;
  readonly result: JsonObject | null;
  readonly startedAt: number;
  readonly finishedAt: number | null;
}

/** One recorded step of a run's life (recovery, upgrade, lease, checkpoint), with its duration. */
export interface RunEvent {
  readonly id: number;
  readonly runId: string;
  readonly at: number;
  /** `recovery`, `upgrade`, `lease`, `checkpoint`, `sandbox`. */
  readonly kind: string;
  /** E.g. `create_sandbox`, `restore`, `setup`, `validate`, `commit`. */
  readonly step: string;
  readonly status: 'ok' | 'failed';
  readonly durationMs: number | null;
  readonly data: JsonObject | null;
}

/** Input of {@link TurnsRepo.addEvent}. */
export interface RunEventInput {
  readonly runId: string;
  readonly kind: string;
  readonly step: string;
  readonly status: 'ok' | 'failed';
  readonly durationMs?: number;
  readonly data?: JsonObject;
}

/** The `turns` and `run_events` tables. */
export interface TurnsRepo {
  /** Inserts a running turn. `ALREADY_EXISTS` when the run already has turn `seq`. */
  start(input: { id?: string; runId: string; seq: number; epoch: number; owner: string }): Promise<Turn>;
  /**
   * Finishes a running turn: `completed` with its checkpoint, or `failed` with its error.
   * `CONFLICT` when it is not running any more; `NOT_FOUND` for an unknown id.
   */
  finish(
    id: string,
    outcome:
      | { status: 'completed'; checkpointId: string; result?: JsonObject }
      | { status: 'failed'; error: RecordedError; result?: JsonObject },
  ): Promise<Turn>;
  /**
   * Fails every turn of the run still `running` under an epoch below `epoch` with `error` (the
   * holder of `epoch` holds the lease, so no such turn can complete any more); the turns
   * failed, oldest first.
   */
  failBefore(runId: string, epoch: number, error: RecordedError): Promise<Turn[]>;
  /** The run's turns, newest first, at most `limit`; with `afterSeq`, only those of a lower `seq` (a keyset page). */
  list(runId: string, limit?: number, afterSeq?: number): Promise<Turn[]>;
  /** Appends an event to the run's history. */
  addEvent(event: RunEventInput): Promise<void>;
  /** The run's events in the order they happened (oldest first), at most the last `limit`. */
  listEvents(runId: string, limit?: number): Promise<RunEvent[]>;
}

/** Builds the turns repository over `context.db` (a store or a transaction). */
export function createTurnsRepo({ db, now }: RepoContext): TurnsRepo {
  const findById = async (id: string): Promise<Turn | undefined> => {
    const row = await db.selectFrom('turns').selectAll().where('id', '=', id).executeTakeFirst();
    return row === undefined ? undefined : toTurn(row);
  };
  return {
    async start(input) {
      const row = {
        id: input.id ?? newId(),
        run_id: requireText(input.runId, 'runId'),
        seq: requireCount(input.seq, 'seq'),
        epoch: requireCount(input.epoch, 'epoch'),
        owner: requireText(input.owner, 'owner'),
        status: 'running' as const,
        checkpoint_id: null,
        error: null,
        result: null,
        started_at: now(),
        finished_at: null,
      };
      await db.insertInto('turns').values(row).execute();
      return toTurn(row);
    },
    async finish(id, outcome) {
      const values =
        outcome.status === 'completed'
          ? { status: outcome.status, checkpoint_id: outcome.checkpointId }
          : { status: outcome.status, error: toJsonText(outcome.error, 'error') };
      const row = await db
        .updateTable('turns')
        .set({ ...values, result: outcome.result === undefined ? null : toJsonText(outcome.result, 'result'), finished_at: now() })
        .where('id', '=', id)
        .where('status', '=', 'running')
        .returningAll()
        .executeTakeFirst();
      if (row !== undefined) return toTurn(row);
      const current = await findById(id);
      if (current === undefined) throw new NotFoundError(`turn ${id} not found`, { data: { turnId: id } });
      throw new ConflictError('CONFLICT', `turn ${id} is already ${current.status}`, { data: { turnId: id, status: current.status } });
    },
    async failBefore(runId, epoch, error) {
      const rows = await db
        .updateTable('turns')
        .set({ status: 'failed', error: toJsonText(error, 'error'), finished_at: now() })
        .where('run_id', '=', runId)
        .where('status', '=', 'running')
        .where('epoch', '<', requireCount(epoch, 'epoch'))
        .returningAll()
        .execute();
      return rows.map(toTurn).sort((a, b) => a.seq - b.seq);
    },
    async list(runId, limit = 100, afterSeq) {
      let query = db.selectFrom('turns').selectAll().where('run_id', '=', runId);
      if (afterSeq !== undefined) query = query.where('seq', '<', afterSeq);
      const rows = await query.orderBy('seq', 'desc').limit(requireCount(limit, 'limit')).execute();
      return rows.map(toTurn);
    },
    async addEvent(event) {
      await db
        .insertInto('run_events')
        .values({
          run_id: event.runId,
          at: now(),
          kind: requireText(event.kind, 'kind'),
          step: requireText(event.step, 'step'),
          status: event.status,
          duration_ms: event.durationMs === undefined ? null : Math.round(event.durationMs),
          data: event.data === undefined ? null : toJsonText(event.data, 'data'),
        })
        .execute();
    },
    async listEvents(runId, limit = 500) {
      const rows = await db
        .selectFrom('run_events')
        .selectAll()
        .where('run_id', '=', runId)
        .orderBy('id', 'desc')
        .limit(requireCount(limit, 'limit'))
        .execute();
      return rows.reverse().map(toEvent);
    },
  };
}

function toTurn(row: Selectable<TurnsTable>): Turn {
  return {
    id: row.id,
    runId: row.run_id,
    seq: row.seq,
    epoch: row.epoch,
    owner: row.owner,
    status: row.status,
    checkpointId: row.checkpoint_id,
    error: recordedErrorFromText(row.error),
    result: fromJsonText(row.result),
    startedAt: row.started_at,
    finishedAt: row.finished_at,
  };
}

function toEvent(row: Selectable<RunEventsTable>): RunEvent {
  return {
    id: Number(row.id),
    runId: row.run_id,
    at: row.at,
    kind: row.kind,
    step: row.step,
    status: row.status,
    durationMs: row.duration_ms,
    data: fromJsonText(row.data),
  };
}
