// The route table: every path the service answers, compiled at start-up into a tree of path
// segments, so finding a route is one map lookup per segment however many tables there are.

/** A path template's routed value, and the `{id}` segment of the request path (decoded), if any. */
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

/** Decodes a path segment as polka did (a malformed escape stays as sent: it then names no element). */
function decodeSegment(segment: string): string {
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
 * Builds the table from path templates such as `/users/{id}/pets`: literal segments are map keys,
 * `{…}` is the one parameter a level may have (a literal wins over it).
 * @throws {Error} when two templates are the same path
 */
export function createRouteTable<T>(entries: { path: string; value: T }[]): RouteTable<T> {
  const root = node<T>();
  for (const { path, value } of entries) {
    let at = root;
    for (const segment of path === '/' ? [] : path.slice(1).split('/')) {
      if (segment.startsWith('{')) at = at.param ??= node();
      else {
        const next = at.statics.get(segment) ?? node<T>();
        at.statics.set(segment, next);
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
        const literal: Node<T> | undefined = at.statics.get(text);
        if (literal) at = literal;
        else if (at.param) {
          at = at.param;
          segment = decodeSegment(text);
        } else return undefined;
        start = stop + 1;
      }
      return at?.value === undefined ? undefined : { value: at.value, segment };
    },
  };
}
