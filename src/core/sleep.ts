/** A promise that resolves after `ms` milliseconds: the one way to wait in the service and its benches. */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
