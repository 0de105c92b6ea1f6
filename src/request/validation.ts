// Pure checks that turn a parsed JSON body into the row a resource accepts, with the registry's
// zod schemas; every failure is a 4xx ApiError with a bounded list of field errors. No I/O here.
import { isDeepStrictEqual } from 'node:util';
import type { z } from 'zod';
import { ApiError, atElement, echo, type FieldError, MAX_ECHOED_LENGTH, MAX_REPORTED_ERRORS, unlistedErrors } from '../errors.js';
import { toInstant } from '../model/instant.js';
import { type Resource, SERVER_MANAGED_FIELDS } from '../model/registry.js';

export type Row = Record<string, unknown>;

/** How deep arrays and objects may nest in a body (a top-level object is level 1); deeper is a 400. */
export const MAX_JSON_DEPTH = 64;
/** A UTF-16 code unit of a surrogate pair standing alone: no Unicode text, so no UTF-8 can store it. */
export const LONE_SURROGATE = /\p{Surrogate}/u;

function isObject(value: unknown): value is Row {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The field errors of one body: every one is counted, the first MAX_REPORTED_ERRORS are kept, so
 * a body with 50,000 bad keys costs a 422 of a few kilobytes.
 */
class FieldErrors {
  readonly list: FieldError[] = [];
  total = 0;

  /** Adds one error; a `path` given as a function is only built when the error is listed. */
  add(path: string | (() => string), message: string): void {
    this.total++;
    if (this.list.length < MAX_REPORTED_ERRORS) this.list.push({ path: echo(typeof path === 'string' ? path : path()), message });
  }

  /** Appends the errors of `other`, counting those it only counted. */
  addAll(other: FieldErrors): void {
    for (const error of other.list) if (this.list.length < MAX_REPORTED_ERRORS) this.list.push(error);
    this.total += other.total;
  }

  /** The detail of the problem: `summary`, and how many errors were left out of the list. */
  detail(summary: string): string {
    return summary + unlistedErrors(this.list.length, this.total);
  }

  /** Throws the 422 listing them, when there are any. */
  throwIfAny(summary: string): void {
    if (this.total > 0) throw new ApiError('unprocessable', this.detail(summary), { errors: this.list });
  }
}

/** Where a value sits in a body, as a linked list so paths are only joined when an error names one. */
interface Place {
  key: string;
  parent: Place | undefined;
}

/**
 * The dotted path of a place, each key cut short first (keys may be a megabyte long); in an array of
 * elements (a bulk body) the element's index comes first as bulk refusals write it (`3/name`).
 */
function pathOf(place: Place | undefined, elements: boolean): string {
  const keys: string[] = [];
  // Enough UTF-16 units for MAX_ECHOED_LENGTH code points and one more: echo() cuts it to them and marks the cut.
  for (let p = place; p; p = p.parent) keys.push(p.key.slice(0, 2 * MAX_ECHOED_LENGTH + 1));
  const [first, ...rest] = keys.reverse();
  return elements && rest.length > 0 ? `${first}/${rest.join('.')}` : keys.join('.');
}

function reportAt(errors: FieldErrors, place: Place | undefined, what: string, elements = false): void {
  errors.add(() => pathOf(place, elements), `${what} a lone UTF-16 surrogate, which is not Unicode text`);
}

/** The 400 for a body nested deeper than MAX_JSON_DEPTH. */
const tooDeep = (levels = MAX_JSON_DEPTH) =>
  new ApiError('badRequest', `The request body nests arrays and objects deeper than ${levels} levels.`, { problemCode: 'bad-json' });

/** The 400 for an object of more than MAX_OBJECT_MEMBERS members. */
const tooManyMembers = () =>
  new ApiError('badRequest', `An object in the request body has more than ${MAX_OBJECT_MEMBERS} members.`, { problemCode: 'bad-json' });

/**
 * The most members a JSON object in a body may have: SQLite's default column limit (2,000), so no
 * representation can need more; past it the body is refused before it is parsed.
 */
export const MAX_OBJECT_MEMBERS = 2000;

/**
 * Refuses JSON text that nests deeper than `levels` (MAX_JSON_DEPTH), or holds an object of more than
 * MAX_OBJECT_MEMBERS members, before it is parsed: one pass over the characters (strings and their
 * escapes skipped), so a megabyte of `[` or of unknown keys costs a millisecond or two instead of
 * JSON.parse building it all. Malformed text is left for JSON.parse to refuse.
 * @throws 400 past either limit
 */
export function checkJsonText(text: string, levels = MAX_JSON_DEPTH): void {
  let depth = 0;
  // Per open container: whether it is an object, and how many commas it holds so far.
  const objects = new Uint8Array(levels + 1);
  const commas = new Uint32Array(levels + 1);
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // A string: skip to its closing quote, stepping over escapes.
      for (i++; i < text.length && text.charCodeAt(i) !== 0x22; i++) if (text.charCodeAt(i) === 0x5c) i++;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > levels) throw tooDeep(levels);
      objects[depth] = c === 0x7b ? 1 : 0;
      commas[depth] = 0;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    } else if (c === 0x2c && depth > 0 && objects[depth] === 1 && ++(commas[depth] as number) >= MAX_OBJECT_MEMBERS) {
      throw tooManyMembers();
    }
  }
}

/**
 * Checks what every JSON body must satisfy before anything else walks it, without recursion:
 * arrays and objects nest at most MAX_JSON_DEPTH levels (so the merge patch, the Idempotency-Key
 * fingerprint, zod and JSON.stringify never recurse without a bound), and every string and key is
 * well-formed Unicode (a lone surrogate such as "\ud800" would be stored as U+FFFD, making two
 * different values one, so it is refused rather than silently altered).
 * @throws 400 past the depth limit, 422 naming each field that holds a lone surrogate
 */
export function checkJsonDocument(document: unknown, levels = MAX_JSON_DEPTH): void {
  const errors = new FieldErrors();
  // A depth-first walk in document order with one frame per open array or object: the listed
  // errors are the first ones, and only containers cost an allocation.
  const frames: { value: object; keys: string[] | undefined; next: number; place: Place | undefined }[] = [];
  const enter = (value: object, place: Place | undefined) => {
    if (frames.length >= levels) throw tooDeep(levels);
    const keys = Array.isArray(value) ? undefined : Object.keys(value);
    frames.push({ value, keys, next: 0, place });
  };
  // A bulk array is refused as its first refused element alone would be, prefixed by its index.
  const elements = Array.isArray(document);
  let element: number | undefined;
  if (typeof document === 'string' && LONE_SURROGATE.test(document)) reportAt(errors, undefined, 'contains');
  if (typeof document === 'object' && document !== null) enter(document, undefined);
  while (frames.length > 0) {
    const frame = frames[frames.length - 1] as (typeof frames)[number];
    const { value, keys, place } = frame;
    if (elements && frames.length === 1) {
      if (errors.total > 0) break; // the element with the first error is walked whole; the rest are not
      element = frame.next;
    }
    const index = frame.next++;
    if (index >= (keys ?? (value as unknown[])).length) {
      frames.pop();
      continue;
    }
    const key = keys ? (keys[index] as string) : undefined;
    const child: unknown = key === undefined ? (value as unknown[])[index] : (value as Row)[key];
    // No closure here: one per member would cost an allocation per member.
    if (key !== undefined && LONE_SURROGATE.test(key)) reportAt(errors, { key, parent: place }, 'is a name with', elements);
    if (typeof child === 'string') {
      if (LONE_SURROGATE.test(child)) reportAt(errors, { key: key ?? String(index), parent: place }, 'contains', elements);
    } else if (typeof child === 'object' && child !== null) {
      enter(child, { key: key ?? String(index), parent: place });
    }
  }
  const summary = 'The request body holds text that is not well-formed Unicode (a lone UTF-16 surrogate such as "\\ud800").';
  errors.throwIfAny(elements ? `Element ${element}: ${summary}` : summary);
}

function requireObject(resource: Resource, body: unknown): Row {
  if (!isObject(body)) {
    throw new ApiError('unprocessable', `The body is not a valid ${resource.name} representation.`, {
      errors: [{ path: '', message: 'must be a JSON object' }],
    });
  }
  return body;
}

const fieldsOfSchema = new WeakMap<z.ZodObject, Set<string>>();

/** The field names a schema takes, computed once per schema. */
function fieldsOf(schema: z.ZodObject): Set<string> {
  let fields = fieldsOfSchema.get(schema);
  if (!fields) {
    fields = new Set(Object.keys(schema.shape));
    fieldsOfSchema.set(schema, fields);
  }
  return fields;
}

/**
 * Whether a client's value repeats a value the server holds (a read-only field, a key from the
 * path). Held values are SQLite scalars, so the comparison stops at once on a nested client value.
 * A timestamp the server manages is repeated by the same instant written as filters take one
 * (`…Z`, `…+00:00`, `.500` or `.500000`: src/model/instant.ts).
 */
function repeats(value: unknown, held: unknown, key?: string): boolean {
  if (isDeepStrictEqual(value, held)) return true;
  if (typeof value !== 'string' || !(SERVER_MANAGED_FIELDS as readonly string[]).includes(key ?? '')) return false;
  // Held as text, or as a Date (a timestamp column kept as a number: integer({ mode: 'timestamp' })).
  const instant = held instanceof Date ? held.getTime() : typeof held === 'string' ? Date.parse(held) : undefined;
  return instant !== undefined && toInstant(value)?.getTime() === instant;
}

/**
 * Sorts the own keys of `body` before zod sees it: read-only ones must repeat `current` (or, with no
 * `current`, not appear), unknown ones are errors, and the rest are copied for validation. Checking
 * the key set here keeps zod's work bounded by the schema, not by how many keys a client sends.
 * @see docs/http-api.md#representations
 */
function sortKeys(resource: Resource, body: Row, readOnly: Set<string>, fields: Set<string>, current?: Row) {
  const data: Row = Object.create(null);
  const errors = new FieldErrors();
  const unknown = new FieldErrors();
  for (const key of Object.keys(body)) {
    if (readOnly.has(key)) {
      if (!current || !repeats(body[key], current[key], key)) {
        errors.add(key, current ? 'is read-only; it may only repeat its current value' : 'is set by the server');
      }
    } else if (fields.has(key)) {
      data[key] = body[key];
    } else {
      unknown.add(key, `is not a field of ${resource.name}`);
    }
  }
  return { data, errors, unknown };
}

/**
 * Validates `data` (known fields only) against `schema`, reporting `errors` found earlier (read-only
 * or path conflicts) together with the schema's and then the `unknown` keys, so a client sees every
 * problem at once, the errors about its fields first.
 */
function parseWith(resource: Resource, schema: z.ZodObject, data: Row, errors: FieldErrors, unknown: FieldErrors): Row {
  const result = schema.safeParse(data);
  if (!result.success) {
    // Unknown keys never reach zod (sortKeys kept them apart), so every issue is about a field. One per
    // field and kind of problem: an integer past 2^53 breaks both zod's integer range and the column's bound.
    const reported = new Set<string>();
    for (const issue of result.error.issues) {
      const path = issue.path.join('.');
      if (reported.has(`${issue.code} ${path}`)) continue;
      reported.add(`${issue.code} ${path}`);
      const missing = issue.path.length === 1 && !Object.hasOwn(data, String(issue.path[0]));
      errors.add(path, missing ? 'is required' : issue.message);
    }
  }
  errors.addAll(unknown);
  errors.throwIfAny(`The body is not a valid ${resource.name} representation.`);
  return result.data as Row;
}

/** Validates a create body; `fixed` holds values that come from the path (a related POST). */
export function toCreateRow(resource: Resource, body: unknown, fixed: Row = {}): Row {
  const schema = resource.createSchema;
  const { data, errors, unknown } = sortKeys(resource, requireObject(resource, body), resource.serverAssigned, fieldsOf(schema));
  for (const [key, value] of Object.entries(fixed)) {
    if (Object.hasOwn(data, key) && !repeats(data[key], value)) errors.add(key, `must be ${JSON.stringify(value)}, as in the path`);
    data[key] = value;
  }
  return parseWith(resource, schema, data, errors, unknown);
}

/** How many elements one bulk create may hold (docs/bulk-and-batch.md). */
export const BULK_ELEMENTS = { min: 1, max: 1000 } as const;

/** Validates a bulk create: 1–1000 elements, each as toCreateRow; the first refused element's errors, prefixed by its index. */
export function toCreateRows(resource: Resource, body: unknown[], fixed: Row = {}): Row[] {
  if (body.length < BULK_ELEMENTS.min || body.length > BULK_ELEMENTS.max) {
    throw new ApiError(
      'unprocessable',
      `A bulk create holds ${BULK_ELEMENTS.min} to ${BULK_ELEMENTS.max} elements; this array holds ${body.length}.`,
    );
  }
  return body.map((element, i) => {
    try {
      return toCreateRow(resource, element, fixed);
    } catch (error) {
      throw atElement(i, error);
    }
  });
}

/** Validates a full replacement of `current`: fields left out take their defaults (filled in by the store). */
export function toReplacementRow(resource: Resource, body: unknown, current: Row): Row {
  const schema = resource.replaceSchema;
  const { data, errors, unknown } = sortKeys(resource, requireObject(resource, body), resource.readOnly, fieldsOf(schema), current);
  return parseWith(resource, schema, data, errors, unknown);
}

/**
 * Applies a JSON Merge Patch to a JSON value: null removes a member, objects merge, anything else
 * replaces. Iterative, so no nesting depth can exhaust the stack; the objects it builds have no
 * prototype and it reads only own keys, so "__proto__", "constructor" or "toString" are ordinary
 * member names (never the prototype or an inherited method).
 * @see https://www.rfc-editor.org/rfc/rfc7396#section-2
 */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const copy = (value: unknown): Row => Object.assign(Object.create(null), isObject(value) ? value : {});
  const root = copy(target);
  const work: [Row, Row][] = [[root, patch]];
  for (let next = work.pop(); next; next = work.pop()) {
    const [result, changes] = next;
    for (const key of Object.keys(changes)) {
      const value = changes[key];
      if (value === null) {
        delete result[key];
      } else if (isObject(value)) {
        const merged = copy(Object.hasOwn(result, key) ? result[key] : undefined);
        result[key] = merged;
        work.push([merged, value]);
      } else {
        result[key] = value;
      }
    }
  }
  return root;
}

/**
 * Validates a merge patch of `current`: the merged document must be a valid replacement. Every
 * member the patch names must be a field (null included: a misspelt field is an error, not a no-op).
 */
export function toPatchedRow(resource: Resource, patch: unknown, current: Row): Row {
  const schema = resource.replaceSchema;
  const fields = fieldsOf(schema);
  const { data, errors, unknown } = sortKeys(resource, requireObject(resource, patch), resource.readOnly, fields, current);
  const writable: Row = Object.create(null);
  // The current values as the representation holds them (a patch merges into that): a timestamp kept as a
  // number is read as a Date, and written as its text.
  for (const key of fields) {
    if (!Object.hasOwn(current, key)) continue;
    const value = current[key];
    writable[key] = value instanceof Date ? value.toJSON() : value;
  }
  return parseWith(resource, schema, applyMergePatch(writable, data) as Row, errors, unknown);
}
