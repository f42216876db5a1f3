/** A failure the operator can act on: its message is the whole output (no stack). */
export class QuickstartError extends Error {
  override name = 'QuickstartError';
}

/** What this machine lacks, one line each; nothing was changed. */
export class MissingPrerequisites extends QuickstartError {
  constructor(readonly missing: string[]) {
    super(`This machine cannot be svc's first server yet; nothing was changed. Missing:\n${missing.map((m) => `- ${m}`).join('\n')}`);
  }
}
