/** One schema change, written out for each dialect. */
export interface Migration {
  /** Consecutive from 1; recorded in `holdfast_schema_migrations.version`. */
  readonly version: number;
  /** Short snake_case description, recorded alongside the version. */
  readonly name: string;
  /** Statements for SQLite, run in order. */
  readonly sqlite: readonly string[];
  /** Statements for PostgreSQL, run in order. */
  readonly postgres: readonly string[];
}
