// Pure checks that turn a parsed JSON body into the row a resource accepts, with the registry's
// zod schemas; every failure is a 422 ApiError listing field errors. No I/O happens here.
import { isDeepStrictEqual } from 'node:util';
import type { z } from 'zod';
import { ApiError, type FieldError } from './errors.js';
import type { Resource } from './resources.js';

export type Row = Record<string, unknown>;

function isObject(value: unknown): value is Row {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function invalid(resource: Resource, errors: FieldError[]): ApiError {
  return new ApiError('unprocessable', `The body is not a valid ${resource.name} representation.`, { errors });
}

function requireObject(resource: Resource, body: unknown): Row {
  if (!isObject(body)) throw invalid(resource, [{ path: '', message: 'must be a JSON object' }]);
  return body;
}

function toFieldErrors(resource: Resource, error: z.ZodError, data: Row): FieldError[] {
  return error.issues.flatMap((issue): FieldError[] => {
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({ path: key, message: `is not a field of ${resource.name}` }));
    }
    const path = issue.path.join('.');
    const missing = issue.path.length === 1 && !(String(issue.path[0]) in data);
    return [{ path, message: missing ? 'is required' : issue.message }];
  });
}

/**
 * Validates `data` against `schema`, reporting `earlier` errors (read-only or path conflicts) together
 * with the schema's, so a client sees every problem of its body at once.
 */
function parseWith(resource: Resource, schema: z.ZodObject, data: Row, earlier: FieldError[] = []): Row {
  const result = schema.safeParse(data);
  const errors = [...earlier, ...(result.success ? [] : toFieldErrors(resource, result.error, data))];
  if (errors.length > 0) throw invalid(resource, errors);
  return result.data as Row;
}

/**
 * Splits off the read-only fields of `body`: each may only repeat the value `current` holds
 * (so a fetched representation can be sent back), and none may appear when nothing is held yet.
 * @see ../shared/API.md §2
 */
function splitReadOnly(body: Row, readOnly: Iterable<string>, current?: Row): { data: Row; errors: FieldError[] } {
  const data = { ...body };
  const errors: FieldError[] = [];
  for (const key of readOnly) {
    if (!(key in data)) continue;
    if (!current || !isDeepStrictEqual(data[key], current[key])) {
      errors.push({ path: key, message: current ? 'is read-only; it may only repeat its current value' : 'is set by the server' });
    }
    delete data[key];
  }
  return { data, errors };
}

/** Validates a create body; `fixed` holds values that come from the path (a related POST). */
export function toCreateRow(resource: Resource, body: unknown, fixed: Row = {}): Row {
  const { data, errors } = splitReadOnly(requireObject(resource, body), resource.serverAssigned);
  for (const [key, value] of Object.entries(fixed)) {
    if (key in data && !isDeepStrictEqual(data[key], value))
      errors.push({ path: key, message: `must be ${JSON.stringify(value)}, as in the path` });
  }
  return parseWith(resource, resource.createSchema, { ...data, ...fixed }, errors);
}

/** Validates a full replacement of `current`: fields left out take their defaults (filled in by the repository). */
export function toReplacementRow(resource: Resource, body: unknown, current: Row): Row {
  const { data, errors } = splitReadOnly(requireObject(resource, body), resource.readOnly, current);
  return parseWith(resource, resource.replaceSchema, data, errors);
}

/**
 * Applies a JSON Merge Patch to a JSON value: null removes a member, objects merge, anything else replaces.
 * @see https://www.rfc-editor.org/rfc/rfc7396#section-2
 */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const result: Row = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = applyMergePatch(result[key], value);
  }
  return result;
}

/** Validates a merge patch of `current`: the merged document must be a valid replacement. */
export function toPatchedRow(resource: Resource, patch: unknown, current: Row): Row {
  const { data, errors } = splitReadOnly(requireObject(resource, patch), resource.readOnly, current);
  const writable = Object.fromEntries(Object.entries(current).filter(([key]) => !resource.readOnly.has(key)));
  return parseWith(resource, resource.replaceSchema, applyMergePatch(writable, data) as Row, errors);
}
