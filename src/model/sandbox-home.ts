/** The layout of a run sandbox's home: where work folders and repositories appear. */

import { FOLDER_SCOPES } from './folder-scopes.js';

/** Directory of the sandbox home that holds the checkouts. */
export const REPOS_DIR = 'repos';

/** The directories of a sandbox home: one per collection scope, and `repos/` for repositories. */
export const HOME_DIRS = [...FOLDER_SCOPES, 'repos'] as const;
