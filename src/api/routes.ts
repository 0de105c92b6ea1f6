// The route table: every path the service answers, compiled at start-up into a tree of path
// segments, so finding a route is one map lookup per segment however many tables there are.

/** A path template's routed value, and the `{id}` segment of the request path (as sent, percent-encoded), if any. */
export interface Match<T> {
  value: T;
  segment?: string;
}

interface Node<T> {
  statics: Map<string, Node<T>>;
  param?: Node<T>;
  value?: T;
}

const node = <T>(): Node<T> => ({ statics: new Map() });

/** Decodes a literal path segment (a malformed escape stays as sent: it then names nothing). */
export function decodeSegment(segment: string): string {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

export interface RouteTable<T> {
  /** The route of a request path (one trailing slash allowed, case-sensitive), or undefined. */
  match(path: string): Match<T> | undefined;
}

/**
 * Builds the table from path templates such as `/users/{id}/pets`: literal segments (decoded, so
 * `/Liner%20Notes` and `/Liner Notes` are one) are map keys, `{…}` is the one parameter a level may
 * have (a literal wins over it). The parameter is left encoded: a composite key splits on `,` first.
 * @throws {Error} when two templates are the same path
 */
export function createRouteTable<T>(entries: { path: string; value: T }[]): RouteTable<T> {
  const root = node<T>();
  for (const { path, value } of entries) {
    let at = root;
    for (const segment of path === '/' ? [] : path.slice(1).split('/')) {
      if (segment.startsWith('{')) at = at.param ??= node();
      else {
        const literal = decodeSegment(segment);
        const next = at.statics.get(literal) ?? node<T>();
        at.statics.set(literal, next);
        at = next;
      }
    }
    if (at.value !== undefined) throw new Error(`two routes are both ${path}`);
    at.value = value;
  }
  return {
    match(path) {
      if (path.includes('//')) return undefined; // no route has an empty segment
      let end = path.length;
      if (end > 1 && path.charCodeAt(end - 1) === 47 /* / */) end--;
      let at: Node<T> | undefined = root;
      let segment: string | undefined;
      for (let start = 1; at && start < end; ) {
        let stop = path.indexOf('/', start);
        if (stop === -1 || stop > end) stop = end;
        const text = path.slice(start, stop);
        const literal: Node<T> | undefined = at.statics.get(decodeSegment(text));
        if (literal) at = literal;
        else if (at.param) {
          at = at.param;
          segment = text;
        } else return undefined;
        start = stop + 1;
      }
      return at?.value === undefined ? undefined : { value: at.value, segment };
    },
  };
}
