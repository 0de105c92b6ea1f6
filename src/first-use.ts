// Values made on their first use, then kept: statements, schemas and documents a process may never
// need, so that start-up and memory pay only for what requests ask for (300 kinds, most never served).

/** A value made on its first use, then kept (a statement prepared when it is first run). */
export function onFirstUse<T>(make: () => T): () => T {
  let value: T | undefined;
  return () => (value ??= make());
}
