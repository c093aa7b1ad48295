/** The four scopes of work folders (DESIGN section 10): one folder tree per scope and owner. */

/** The four scopes a collection can be bound to. */
export const FOLDER_SCOPES = ['task', 'agent', 'user', 'project'] as const;

/** One of {@link FOLDER_SCOPES}. */
export type FolderScope = (typeof FOLDER_SCOPES)[number];
