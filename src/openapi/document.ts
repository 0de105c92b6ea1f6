// Pure: registry → OpenAPI 3.1 document. Paths, methods, parameters (the §5 query language
// included), schemas from the same zod validators the handlers use, headers and every status.
import { is } from 'drizzle-orm';
import { SQLiteNumeric, type SQLiteTable } from 'drizzle-orm/sqlite-core';
import { createSelectSchema } from 'drizzle-zod';
import { z } from 'zod';
import { BATCH_HEADERS, BATCH_METHODS, BATCH_OPERATIONS, BATCH_PATH, LABEL } from '../api/batch.js';
import { CHANGES_PATH, SEQ_PATTERN, TICKET_PATH } from '../api/changes.js';
import { MAX_CHILDREN } from '../api/expand.js';
import { TICKET_TTL_MS } from '../auth/tickets.js';
import { customKindOf, isInteger } from '../db/columns.js';
import { INSTANT_PATTERN } from '../model/instant.js';
import { PROBLEM_CODES } from '../problem-codes.js';
import {
  isComparable,
  JSON_NUMBER,
  LIMIT,
  type Operator,
  operatorsOf,
  QUERY_LIMITS,
  RELEVANCE,
  scalarTypeOf,
} from '../request/list-query.js';
import { BULK_ELEMENTS } from '../request/validation.js';

const optional = <T>(value: T | undefined): T[] => (value === undefined ? [] : [value]);

/** A schema, or an array of 1–1000 of it: a POST body and its answer, single or bulk (docs/bulk-and-batch.md). */
const oneOrMany = (schema: Json): Json => ({
  oneOf: [schema, { type: 'array', items: schema, minItems: BULK_ELEMENTS.min, maxItems: BULK_ELEMENTS.max }],
});

import {
  DECIMAL,
  type Field,
  type Method,
  NUMERIC_DIGITS,
  OPEN_PATHS,
  PROBE_PATHS,
  READ_METHODS,
  type Registry,
  type Resource,
  type Route,
  SAFE_INTEGER_PATTERN,
  SERVER_MANAGED_FIELDS,
} from '../model/registry.js';

type Json = Record<string, unknown>;

export interface OpenApiOptions {
  title?: string;
  version?: string;
  /** Whether bearer authentication is on (adds the security scheme and 401/403). */
  auth?: boolean;
  /** Whether the per-client rate limit is on (adds 429 wherever it applies: every path but the probes). */
  rateLimit?: boolean;
  /** The service's own endpoints (index, health, docs) with their methods. */
  services?: ServiceEndpoint[];
}

/**
 * A service endpoint as the document describes it: `body` is the JSON Schema of its GET's answer;
 * `alternatives` the other media types GET answers, as its handler negotiates them (text bodies).
 */
export interface ServiceEndpoint {
  path: string;
  methods: readonly Method[];
  summary: string;
  produces: string;
  body?: Json;
  alternatives?: readonly string[];
}

/**
 * A component name OpenAPI accepts (`^[a-zA-Z0-9._-]+$`), one per name: `_` is written `__` and any
 * other character `_<hex code point>_`, so `Liner Notes` is `Liner_20_Notes` and `売上` and `在庫`
 * stay apart (replacing each with `_` made them the same component).
 */
const componentName = (name: string) =>
  name.replace(/[^A-Za-z0-9.-]/gu, (c) => (c === '_' ? '__' : `_${(c.codePointAt(0) as number).toString(16)}_`));
const ref = (section: 'schemas' | 'responses' | 'headers' | 'parameters', name: string) => ({
  $ref: `#/components/${section}/${componentName(name)}`,
});
const byComponentName = (components: Record<string, Json>) =>
  Object.fromEntries(Object.entries(components).map(([name, value]) => [componentName(name), value]));

function jsonSchema(schema: z.ZodType): Json {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as Json;
  return rest;
}

/** The element schema (what GET answers): read-only fields marked, server-managed timestamps as date-times. */
function elementSchema(resource: Resource): Json {
  const schema = jsonSchema(createSelectSchema(resource.table as SQLiteTable));
  const properties = schema.properties as Record<string, Json>;
  for (const field of resource.fields) {
    const custom = customSchemaOf(field);
    if (custom) properties[field.key] = field.column.notNull ? custom : { anyOf: [custom, { type: 'null' }] };
    if (!field.readOnly) continue;
    properties[field.key] = { ...properties[field.key], readOnly: true };
    // The timestamps the server stamps (a generated column is read-only too, as whatever its type is).
    if ((SERVER_MANAGED_FIELDS as readonly string[]).includes(field.key) && !resource.key.includes(field))
      properties[field.key] = { ...properties[field.key], format: 'date-time' };
  }
  return schema;
}

/** Whether a JSON schema admits null (`type: "null"`, a type list with it, or an `anyOf` branch that does). */
function allowsNull(schema: Json): boolean {
  const { type, anyOf } = schema;
  return type === 'null' || (Array.isArray(type) && type.includes('null')) || (Array.isArray(anyOf) && anyOf.some(allowsNull));
}

/** The schema without its null alternative (for a value that must name something, never null). */
function withoutNull(schema: Json): Json {
  if (Array.isArray(schema.type)) return { ...schema, type: schema.type.filter((t) => t !== 'null') };
  if (!Array.isArray(schema.anyOf)) return schema;
  const { anyOf, ...rest } = schema;
  const kept = (anyOf as Json[]).filter((branch) => branch.type !== 'null').map(withoutNull);
  return kept.length === 1 ? { ...rest, ...kept[0] } : { ...rest, anyOf: kept };
}

/**
 * A read-only field as a request body may carry it (docs/http-api.md#representations: a fetched representation can be sent
 * back). It is not marked readOnly here: OpenAPI tools drop or refuse readOnly members of requests
 * (openapi-fetch's Writable, validating proxies with additionalProperties: false), which would make
 * that promise unusable. The element schema, which describes responses, keeps the mark.
 */
function echoSchema(element: Json): Json {
  const { readOnly: _, ...rest } = element;
  return { ...rest, description: 'Read-only: may be left out, or repeat the current value; any other value is a 422.' };
}

/** A create body for a related path (POST /<parent>/{id}/<children>): the path supplies `field`, so the body may leave it out. */
function relatedCreateSchema(schema: Json, field: string, parent: string): Json {
  const properties = { ...(schema.properties as Record<string, Json>) };
  properties[field] = {
    ...withoutNull(properties[field] ?? {}),
    description: `Optional: the id in the path (a key of ${parent}) supplies it; if present it must equal that id (else 422).`,
  };
  const required = ((schema.required as string[] | undefined) ?? []).filter((key) => key !== field);
  const { required: _, ...rest } = schema;
  return { ...rest, properties, ...(required.length > 0 ? { required } : {}) };
}

/** A PUT body: the writable fields (required ones without default required), plus the read-only ones as echoes of the element's. */
function replaceSchema(resource: Resource, elementJson: Json): Json {
  const schema = jsonSchema(resource.replaceSchema);
  const element = elementJson.properties as Record<string, Json>;
  const properties = { ...(schema.properties as Json) };
  for (const key of resource.readOnly) properties[key] = echoSchema(element[key] ?? {});
  return { ...schema, properties };
}

/**
 * A merge patch (RFC 7396) as the server applies it: every member optional; null removes a field,
 * which then takes its default or null, so null is allowed only where that is valid (a nullable
 * field or one with a default). On a required field, and on a read-only one, null is a 422.
 */
function patchSchema(resource: Resource, replace: Json): Json {
  const { required = [], ...schema } = replace as Json & { required?: string[] };
  const properties = Object.fromEntries(
    Object.entries(schema.properties as Record<string, Json>).map(([key, value]) => [
      key,
      resource.readOnly.has(key) || required.includes(key) || allowsNull(value) ? value : { anyOf: [value, { type: 'null' }] },
    ]),
  );
  return {
    ...schema,
    properties,
    description: 'JSON Merge Patch (RFC 7396): members set fields; null resets a field to its default (or null) where it has one.',
  };
}

/** An integer beyond ±(2^53 − 1) is no value JSON carries exactly: a filter with one is a 400. */
const integerSchema = (): Json => ({ type: 'integer', minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER });

/** The values of the column types drizzle-zod cannot describe: BLOBs as base64, untyped columns, intKey(), DATE text, timestamps kept as numbers, exact decimals. */
function customSchemaOf({ column }: Field): Json | undefined {
  const custom = customKindOf(column);
  if (custom === 'bytes') return { type: 'string', contentEncoding: 'base64' };
  if (custom === 'untyped') return { type: ['string', 'number'] };
  if (custom === 'integer' || custom === 'booleanInteger') return integerSchema();
  // Text as stored (drizzle-zod describes a custom type as anything).
  if (custom === 'dateText') return { type: 'string' };
  // A timestamp kept as a number (integer({ mode: 'timestamp' | 'timestamp_ms' })): served as its ISO 8601 text.
  if (column.dataType === 'date') return { type: 'string', format: 'date-time' };
  if (is(column, SQLiteNumeric)) {
    return {
      type: 'string',
      format: 'decimal',
      description: `an exact decimal of at most ${NUMERIC_DIGITS} significant digits, within a double's range`,
    };
  }
  // Any finite double SQLite stores (drizzle-zod bounds a REAL at ±(2^47 − 1), as for MySQL's).
  if (column.columnType === 'SQLiteReal') return { type: 'number' };
  return undefined;
}

/** A regular expression source matching `name` in any letter case (JSON Schema patterns have no flags). */
const anyCase = (name: string) => name.replace(/[a-z]/gi, (c) => `[${c.toUpperCase()}${c.toLowerCase()}]`);

function fieldSchema(field: Field): Json {
  const { column } = field;
  const custom = customSchemaOf(field);
  if (custom) return custom;
  if (isInteger(column)) return integerSchema();
  if (column.dataType === 'number') return { type: 'number' };
  if (column.dataType === 'boolean') return { type: 'boolean' };
  if (column.enumValues?.length) return { type: 'string', enum: column.enumValues };
  return { type: 'string' };
}

/**
 * The value a filter takes, as the server converts it (src/request/list-query.ts): `null` takes true/false; `in` a
 * comma-separated list; `contains`/`startsWith` any text, even on an enum field (a prefix such as
 * `d` is no enum value); every other operator a value of the field's type.
 */
function operandSchema(field: Field, op: Operator): Json {
  if (op === 'null') return { type: 'boolean' };
  if (op === 'contains' || op === 'startsWith') return { type: 'string' };
  if (op === 'in') return listSchema(field);
  return filterValueSchema(field);
}

/**
 * An `in` filter's value: one string of comma-separated values (a client library that repeats an array's
 * parameter would ask for rows matching every value at once: none), each of the field's type where that
 * has a pattern.
 */
function listSchema(field: Field): Json {
  const item = valuePattern(field);
  return { type: 'string', minLength: 1, ...(item !== undefined && { pattern: `^(${item})(,(${item}))*$` }) };
}

/** A filter value of `field` as a pattern without anchors (undefined: any text). */
function valuePattern(field: Field): string | undefined {
  const bare = (source: string) => source.replace(/^\^/, '').replace(/\$$/, '');
  const { enumValues } = field.column;
  switch (scalarTypeOf(field)) {
    case 'integer':
      return SAFE_INTEGER_PATTERN;
    case 'number':
      return bare(JSON_NUMBER.source);
    case 'decimal':
      return bare(DECIMAL.source);
    case 'boolean':
      return 'true|false';
    case 'timestamp':
    case 'date':
      return bare(INSTANT_PATTERN);
    default:
      return enumValues?.length ? enumValues.map((v) => v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|') : undefined;
  }
}

/** One value a filter compares a field with: the field's own schema, but for an instant, which any ISO 8601 date or date-time names. */
function filterValueSchema(field: Field): Json {
  const type = scalarTypeOf(field);
  if (type === 'decimal') return { ...fieldSchema(field), pattern: DECIMAL.source };
  if (type !== 'timestamp' && type !== 'date') return fieldSchema(field);
  return {
    type: 'string',
    pattern: INSTANT_PATTERN,
    description: 'an ISO 8601 date or date-time (UTC when it has no offset), to the millisecond, in years 0000–9999',
  };
}

/** The §5 query language of a list: paging, sort, count, every filter of every scalar field, and [null] of the others. */
function listParameters(resource: Resource): Json[] {
  const scalar = resource.fields.filter(isComparable);
  const filters = resource.fields.flatMap((field) => [
    ...(isComparable(field)
      ? [{ name: field.key, in: 'query', description: `${field.key} equals`, schema: filterValueSchema(field) }]
      : []),
    ...operatorsOf(field).map((op) => ({
      name: `${field.key}[${op}]`,
      in: 'query',
      description: `filter ${field.key} with ${op}${op === 'in' ? ' (comma-separated values)' : ''}`,
      schema: operandSchema(field, op),
    })),
  ]);
  const sortable = scalar.map((f) => f.key).join('|');
  const fields = `-?(${sortable})(,-?(${sortable}))*`;
  const relevance = byRelevance(resource);
  // A kind with no field to sort by (and no relevance) takes no sort: every value would be a 400.
  const sorts = scalar.length > 0 || relevance;
  return [
    ref('parameters', 'limit'),
    ref('parameters', 'cursor'),
    ...(sorts
      ? [
          {
            name: 'sort',
            in: 'query',
            description: `comma-separated fields, each at most once (a field named twice is a 400), "-" for descending; ties broken by the key${
              relevance
                ? `; with q it may start with ${RELEVANCE}, best match first (${RELEVANCE}, or ${RELEVANCE},<fields> for the ties); -${RELEVANCE}, or ${RELEVANCE} without q or after a field, is a 400`
                : ''
            }`,
            schema: {
              type: 'string',
              pattern: relevance ? (scalar.length > 0 ? `^(${RELEVANCE}|(${RELEVANCE},)?${fields})$` : `^${RELEVANCE}$`) : `^${fields}$`,
            },
          },
        ]
      : []),
    ref('parameters', 'count'),
    ...(resource.searchable.length > 0 ? [ref('parameters', searchComponent(resource))] : []),
    fieldsParameter(resource),
    ...optional(expandParameter(resource)),
    ...filters,
  ];
}

/** Whether `sort` may name relevance: the kind is searchable and has no field of that name (which `sort` would mean instead). */
const byRelevance = (resource: Resource) => resource.searchable.length > 0 && !resource.fields.some((f) => f.key === RELEVANCE);

/** The component name of a kind's `q` parameter, shared by its collection and related lists (GET and HEAD). */
const searchComponent = (resource: Resource) => `${resource.name}Search`;

/** `q`: full-text search of the kind's searchable fields (docs/search.md); undefined when it has none. */
function searchParameter(resource: Resource): Json | undefined {
  if (resource.searchable.length === 0) return undefined;
  const fields = resource.searchable.map((f) => f.key).join(', ');
  return {
    name: 'q',
    in: 'query',
    description:
      `full-text search of ${fields}: an element matches when its ${fields} hold${resource.searchable.length === 1 ? 's' : ''} every word ` +
      '(split at white space; case and accents folded; the last word also matches as a prefix). ' +
      'Every character is literal, never query syntax; a word without a letter or digit is left out, and a q with none is a 400. ' +
      `At most ${QUERY_LIMITS.searchWords} words of at most ${QUERY_LIMITS.searchWordLength} characters. ` +
      `Combines with the filters, sort${byRelevance(resource) ? ` (${RELEVANCE} first: best match first)` : ''}, paging and count.`,
    // Only white space holds no word: refused. (Punctuation alone is too, which no portable pattern says.)
    schema: { type: 'string', minLength: 1, pattern: '\\S' },
    example: 'ada lov',
  };
}

/** Relation paths `expand` takes, up to QUERY_LIMITS.expandDepth deep, when there are few enough to list. */
const MAX_LISTED_EXPANSIONS = 200;

function expandPaths(resource: Resource, depth: number = QUERY_LIMITS.expandDepth): string[] {
  if (depth === 0) return [];
  const paths: string[] = [];
  for (const [name, { target }] of resource.expansions) {
    paths.push(name, ...expandPaths(target, depth - 1).map((rest) => `${name}.${rest}`));
    if (paths.length > MAX_LISTED_EXPANSIONS) break;
  }
  return paths;
}

/** `expand`: relation paths, comma-separated (listed as an enum while there are at most MAX_LISTED_EXPANSIONS). */
function expandParameter(resource: Resource): Json | undefined {
  if (resource.expansions.size === 0) return undefined;
  const paths = expandPaths(resource);
  const item = paths.length <= MAX_LISTED_EXPANSIONS ? { type: 'string', enum: paths } : { type: 'string' };
  return {
    name: 'expand',
    in: 'query',
    description: `comma-separated relations (${[...resource.expansions.keys()].join(', ')}), nested with "." up to ${QUERY_LIMITS.expandDepth} levels: each element carries them`,
    style: 'form',
    explode: false,
    schema: { type: 'array', uniqueItems: true, minItems: 1, items: item },
  };
}

/** The element schema with the relations `expand` may add: optional, a to-one one as its element or null, a to-many one as an array. */
function withExpansions(resource: Resource, schema: Json): Json {
  const properties = { ...(schema.properties as Record<string, Json>) };
  for (const [name, { cardinality, target }] of resource.expansions) {
    properties[name] =
      cardinality === 'one'
        ? { anyOf: [ref('schemas', target.name), { type: 'null' }], description: `with expand=${name}` }
        : {
            type: 'array',
            maxItems: MAX_CHILDREN,
            items: ref('schemas', target.name),
            description: `with expand=${name}: the first ${MAX_CHILDREN} in key order`,
          };
  }
  return { ...schema, properties };
}

/** `fields`: the field names an element may be shaped to (comma-separated). */
function fieldsParameter(resource: Resource): Json {
  return {
    name: 'fields',
    in: 'query',
    description: 'comma-separated fields: each element carries exactly those, in schema order',
    style: 'form',
    explode: false,
    schema: { type: 'array', uniqueItems: true, minItems: 1, items: { type: 'string', enum: resource.fields.map((f) => f.key) } },
  };
}

const problem = (description: string, headers?: Json) => ({
  description,
  ...(headers ? { headers } : {}),
  content: { 'application/problem+json': { schema: ref('schemas', 'Problem') } },
});

/** The IETF RateLimit fields, on every answer a limited client gets (the probes are never limited: they have none). */
const RATE_LIMIT_HEADERS = {
  RateLimit: { description: 'IETF RateLimit fields: remaining requests and seconds to the reset', schema: { type: 'string' } },
  'RateLimit-Policy': { description: 'IETF RateLimit-Policy: the limit and its window', schema: { type: 'string' } },
};

/** Every documented error answer (an application/problem+json body): its status, meaning and headers. */
const ERRORS = {
  BadRequest: [400, 'A malformed body or query parameter'],
  Unauthorized: [401, 'No valid bearer token', { 'WWW-Authenticate': { schema: { type: 'string' } } }],
  Forbidden: [
    403,
    'The read-only token may not write',
    { 'WWW-Authenticate': { description: 'Bearer error="insufficient_scope"', schema: { type: 'string' } } },
  ],
  NotFound: [404, 'No element with that id, or no parent for a related path'],
  MethodNotAllowed: [405, 'The path does not define the method used; Allow lists the ones it does', { Allow: ref('headers', 'Allow') }],
  NotAcceptable: [406, 'Accept rules out application/json'],
  Conflict: [409, 'A unique value is taken, or other elements still reference this one'],
  Gone: [
    410,
    'since (or Last-Event-ID) is older than the changes kept (CHANGES_RETENTION_HOURS): read the data afresh, then follow the feed from its end',
  ],
  PreconditionFailed: [
    412,
    'If-Match does not match the current ETag, or (on a write) If-None-Match matches it',
    { ETag: ref('headers', 'ETag') },
  ],
  PayloadTooLarge: [413, 'The body is larger than the configured limit'],
  UnsupportedMediaType: [
    415,
    'The body is not JSON',
    {
      'Accept-Post': { description: 'on a POST: the media types it takes (RFC 9110 §15.5.16)', schema: { type: 'string' } },
      'Accept-Patch': { description: 'on a PATCH: the media types it takes (RFC 5789 §3.1)', schema: { type: 'string' } },
    },
  ],
  Unprocessable: [422, 'The body breaks the schema; errors names each field'],
  TooManyRequests: [
    429,
    'Past the per-client rate limit; Retry-After says when to try again',
    {
      'Retry-After': { schema: { type: 'integer' } },
      ...RATE_LIMIT_HEADERS,
    },
  ],
  Unavailable: [
    503,
    'Not ready, shutting down, or (an event stream) this process already holds CHANGES_MAX_STREAMS streams; Retry-After says when to try again',
    { 'Retry-After': { schema: { type: 'integer' } } },
  ],
  Error: [
    'default',
    'Unexpected failure (500); not ready or overloaded (503 with Retry-After); or a request the server could not take: not received in time (408), an Expect other than 100-continue (417), headers too large (431), a Transfer-Encoding it does not implement (501), an HTTP version other than 1.x (505)',
    { 'Retry-After': { schema: { type: 'integer' } } },
  ],
} as const satisfies Record<string, readonly [number | 'default', string, Json?]>;
type ErrorName = keyof typeof ERRORS;

const COMMON_RESPONSES = Object.fromEntries(
  Object.entries(ERRORS).map(([name, [, description, headers]]) => [name, problem(description, headers as Json | undefined)]),
);

const noBody = (description: string, headers?: Json) => ({ description, ...(headers ? { headers } : {}) });

/** With authentication on: 401 without a valid token, 403 when the read-only token is used for a write. */
function authErrors(options: OpenApiOptions, method: Method): ErrorName[] {
  if (!options.auth) return [];
  return (READ_METHODS as readonly Method[]).includes(method) ? ['Unauthorized'] : ['Unauthorized', 'Forbidden'];
}

/** `lists`: each kind's list parameters, built once for the GET and HEAD of its collection and of its related paths. */
function operation(route: Route, method: Method, options: OpenApiOptions, lists: (resource: Resource) => Json[]): Json {
  const { resource, relation, shape } = route;
  const name = relation ? `${relation.parent.name}_${relation.name}` : resource.name;
  /** The responses of these errors, plus 405 and, with authentication, 401 (and 403 for writes: the read token may read). */
  const errors = (...names: ErrorName[]) =>
    Object.fromEntries(
      [
        ...names,
        'MethodNotAllowed' as const,
        ...authErrors(options, method),
        ...(options.rateLimit ? (['TooManyRequests'] as const) : []),
      ].map((name) => [ERRORS[name][0], ref('responses', name)]),
    );
  const element = ref('schemas', resource.name);
  const json = (schema: Json) => ({ 'application/json': { schema } });
  const idParam =
    shape === 'collection'
      ? []
      : [ref('parameters', `${shape === 'element' ? resource.name : (relation as NonNullable<Route['relation']>).parent.name}Id`)];
  const parent = shape === 'related' ? ['NotFound' as const] : [];
  const list = shape !== 'element';
  const base = { tags: [resource.name], parameters: idParam };
  switch (method) {
    case 'GET':
    case 'HEAD': {
      const headOnly = method === 'HEAD' ? ' (headers only)' : '';
      const ok = list
        ? {
            description: `A page of the elements of ${resource.name}`,
            headers: { Link: ref('headers', 'Link'), 'X-Total-Count': ref('headers', 'X-Total-Count') },
            content: json({ type: 'array', items: element }),
          }
        : {
            description: `The element of ${resource.name}`,
            headers: { ETag: ref('headers', 'ETag') },
            content: json(element),
          };
      return {
        ...base,
        operationId: `${method === 'GET' ? (list ? 'list' : 'get') : 'head'}_${name}${list ? '' : '_element'}`,
        summary: list
          ? `List the elements of ${resource.name}${relation ? ` whose ${relation.field} names the path's element of ${relation.parent.name}` : ''}${headOnly}`
          : `Get one element of ${resource.name}${headOnly}`,
        parameters: [
          ...idParam,
          ...(list
            ? lists(resource)
            : [
                fieldsParameter(resource),
                ...optional(expandParameter(resource)),
                ref('parameters', 'If-Match'),
                ref('parameters', 'If-None-Match'),
              ]),
        ],
        responses: {
          200: ok,
          ...(list ? {} : { 304: noBody('Not modified (If-None-Match matched)', { ETag: ref('headers', 'ETag') }) }),
          ...errors('BadRequest', ...(list ? parent : (['NotFound', 'PreconditionFailed'] as const)), 'NotAcceptable', 'Error'),
        },
      };
    }
    case 'POST':
      return {
        ...base,
        operationId: `create_${name}`,
        summary: `Create an element of ${resource.name}${relation ? ` with ${relation.field} from the path` : ''}`,
        parameters: [...idParam, ref('parameters', 'Idempotency-Key')],
        requestBody: {
          required: true,
          description: `one element, or an array of ${BULK_ELEMENTS.min}–${BULK_ELEMENTS.max} created in one transaction, all or none (a refusal names the element: errors[].path "3/email")`,
          content: json(oneOrMany(ref('schemas', relation ? `${resource.name}.create.${relation.field}` : `${resource.name}.create`))),
        },
        responses: {
          201: {
            description: 'Created: the element (with Location and ETag), or the array of created elements in request order',
            headers: {
              Location: ref('headers', 'Location'),
              ETag: ref('headers', 'ETag'),
              'Idempotent-Replayed': ref('headers', 'Idempotent-Replayed'),
            },
            content: json(oneOrMany(element)),
          },
          ...errors(
            'BadRequest',
            ...parent,
            'NotAcceptable',
            'Conflict',
            'PayloadTooLarge',
            'UnsupportedMediaType',
            'Unprocessable',
            'Error',
          ),
        },
      };
    case 'PUT':
    case 'PATCH':
      return {
        ...base,
        operationId: `${method === 'PUT' ? 'replace' : 'patch'}_${name}`,
        summary: `${method === 'PUT' ? 'Replace' : 'Merge-patch'} an element of ${resource.name}`,
        parameters: [...idParam, ref('parameters', 'If-Match'), ref('parameters', 'If-None-Match')],
        requestBody: {
          required: true,
          content:
            method === 'PUT'
              ? json(ref('schemas', `${resource.name}.replace`))
              : {
                  'application/merge-patch+json': { schema: ref('schemas', `${resource.name}.patch`) },
                  ...json(ref('schemas', `${resource.name}.patch`)),
                },
        },
        responses: {
          200: { description: 'The element as stored', headers: { ETag: ref('headers', 'ETag') }, content: json(element) },
          ...errors(
            'BadRequest',
            'NotFound',
            'NotAcceptable',
            'Conflict',
            'PreconditionFailed',
            'PayloadTooLarge',
            'UnsupportedMediaType',
            'Unprocessable',
            'Error',
          ),
        },
      };
    case 'DELETE':
      return {
        ...base,
        operationId: `delete_${name}`,
        summary: `Delete an element of ${resource.name}`,
        parameters: [...idParam, ref('parameters', 'If-Match'), ref('parameters', 'If-None-Match')],
        responses: { 204: noBody('Deleted'), ...errors('BadRequest', 'NotFound', 'Conflict', 'PreconditionFailed', 'Error') },
      };
    case 'OPTIONS':
      return {
        ...base,
        operationId: `options_${name}${shape === 'element' ? '_element' : ''}`,
        summary: 'The methods this path supports',
        responses: {
          204: noBody('Allow lists the methods', { Allow: ref('headers', 'Allow') }),
          ...errors('BadRequest', ...(shape === 'collection' ? [] : (['NotFound'] as const)), 'Error'),
        },
      };
  }
}

/**
 * An operation of the service's own endpoints. HEAD declares GET's media type too: generators derive
 * Accept from the declared responses, and one with only problem+json to choose from gets a 406.
 * The probes and the documentation stay open when authentication is on (OPEN_PATHS in src/model/registry.ts).
 */
function serviceOperation(service: ServiceEndpoint, method: Method, options: OpenApiOptions): Json {
  const { path, summary, produces, body, alternatives = [] } = service;
  const id = path === '/' ? 'index' : path.replace(/[^a-z]/g, '');
  const open = OPEN_PATHS.has(path);
  const auth = options.auth ? (open ? { security: [] } : {}) : {};
  const guardAnswers = {
    ...(options.auth && !open ? { 401: ref('responses', 'Unauthorized') } : {}),
    ...(options.rateLimit && !PROBE_PATHS.has(path) ? { 429: ref('responses', 'TooManyRequests') } : {}),
  };
  if (method === 'OPTIONS')
    return {
      tags: ['service'],
      operationId: `options_${id}`,
      summary: 'The methods this path supports',
      ...auth,
      responses: {
        204: noBody('Allow lists the methods', { Allow: ref('headers', 'Allow') }),
        400: ref('responses', 'BadRequest'),
        ...guardAnswers,
        405: ref('responses', 'MethodNotAllowed'),
        default: ref('responses', 'Error'),
      },
    };
  const schema = body ?? (produces === 'application/json' ? { type: 'object' } : { type: 'string' });
  return {
    tags: ['service'],
    operationId: `${method.toLowerCase()}_${id}`,
    summary,
    ...auth,
    responses: {
      200: {
        description: summary,
        content: { [produces]: { schema }, ...Object.fromEntries(alternatives.map((type) => [type, { schema: { type: 'string' } }])) },
      },
      400: ref('responses', 'BadRequest'),
      ...guardAnswers,
      405: ref('responses', 'MethodNotAllowed'),
      406: ref('responses', 'NotAcceptable'),
      ...(path === '/readyz' ? { 503: ref('responses', 'Unavailable') } : {}),
      default: ref('responses', 'Error'),
    },
  };
}

/** `/_batch` (docs/bulk-and-batch.md): its envelope, its results, and the problem of a failed operation. */
function batchPath(options: OpenApiOptions): { path: Json; schemas: Record<string, Json> } {
  const json = (schema: Json) => ({ 'application/json': { schema } });
  const errors = (method: Method, ...names: ErrorName[]) =>
    Object.fromEntries(
      [
        ...names,
        'MethodNotAllowed' as const,
        ...authErrors(options, method),
        ...(options.rateLimit ? (['TooManyRequests'] as const) : []),
      ].map((name) => [ERRORS[name][0], ref('responses', name)]),
    );
  const schemas: Record<string, Json> = {
    'batch.operation': {
      type: 'object',
      required: ['method', 'path'],
      additionalProperties: false,
      properties: {
        method: { enum: [...BATCH_METHODS] },
        path: {
          type: 'string',
          pattern: '^/',
          description:
            'a resource path (collection, element or related list; a query string on GET); `{label}` stands for the key of the element the operation with that label created',
        },
        body: {
          description: 'required for POST, PUT and PATCH, refused on GET and DELETE; a value {"$ref": "<label>"} stands for that key',
        },
        headers: {
          type: 'object',
          description: `only ${BATCH_HEADERS.join(', ')}, names in any letter case. Content-Type, as alone: application/json (charset=utf-8 if a charset is named), or on a PATCH application/merge-patch+json too; any other is that operation's 415. Without it an operation's body is application/json`,
          // Header names in any letter case, as HTTP reads them (`if-match` too).
          propertyNames: { pattern: `^(${BATCH_HEADERS.map(anyCase).join('|')})$` },
          additionalProperties: { type: 'string' },
        },
        label: { type: 'string', pattern: LABEL.source, description: 'names the element this POST creates, for later operations' },
      },
    },
    'batch.request': {
      type: 'object',
      required: ['operations'],
      additionalProperties: false,
      properties: {
        operations: {
          type: 'array',
          minItems: BATCH_OPERATIONS.min,
          maxItems: BATCH_OPERATIONS.max,
          items: ref('schemas', 'batch.operation'),
        },
      },
    },
    'batch.results': {
      type: 'object',
      required: ['results'],
      properties: {
        results: {
          type: 'array',
          description: 'one per operation, in order: what it answers alone',
          items: {
            type: 'object',
            required: ['status', 'headers', 'body'],
            properties: {
              status: { type: 'integer' },
              headers: {
                type: 'object',
                description: 'ETag, Location, Link, X-Total-Count as the operation sends them',
                additionalProperties: { type: 'string' },
              },
              body: { description: "the operation's JSON body, null when it has none (204, 304)" },
            },
          },
        },
      },
    },
  };
  const failed = {
    description:
      'The first operation that failed rolled the batch back: its status and problem, with its index as `operation`; ' +
      'or (400, without `operation`) the envelope is refused before any operation runs: not 1–100 operations, a member not ' +
      'listed, a body on GET or DELETE or none on a write, a label not on a POST that creates one element, a label used ' +
      'before it is defined or twice, a path that is no resource path',
    content: {
      'application/problem+json': {
        schema: { allOf: [ref('schemas', 'Problem'), { type: 'object', properties: { operation: { type: 'integer', minimum: 0 } } }] },
      },
    },
  };
  const path = {
    post: {
      tags: ['service'],
      operationId: 'batch',
      summary: `Run ${BATCH_OPERATIONS.min}–${BATCH_OPERATIONS.max} operations in order in one transaction, all or nothing`,
      parameters: [ref('parameters', 'Idempotency-Key')],
      requestBody: { required: true, content: json(ref('schemas', 'batch.request')) },
      responses: {
        200: {
          description: 'Every operation succeeded and was committed',
          headers: { 'Idempotent-Replayed': ref('headers', 'Idempotent-Replayed') },
          content: json(ref('schemas', 'batch.results')),
        },
        '4XX': failed,
        // The failing operation's own status (400, 405, 413, 422…) carries `operation` too; an envelope refused whole
        // does not: its Accept (406) and media type (415) are the batch request's own, an operation's never fail.
        ...errors('POST', 'NotAcceptable', 'UnsupportedMediaType', 'Error'),
        ...Object.fromEntries(['400', '405', '413', '422'].map((status) => [status, failed])),
      },
    },
    options: {
      tags: ['service'],
      operationId: 'options_batch',
      summary: 'The methods this path supports',
      responses: {
        204: noBody('Allow lists the methods', { Allow: ref('headers', 'Allow') }),
        ...errors('OPTIONS', 'BadRequest', 'Error'),
      },
    },
  };
  return { path, schemas };
}

/** The kinds whose writes the change feed records (docs/changes.md): tables with a primary key. */
const recordedKinds = (registry: Registry) => registry.resources.filter((r) => !r.readOnlyKind && r.key.length > 0);

/**
 * A key value as a change's `id` carries it: the value the database stores, so a number or a string
 * where the field's representation is one; other types (dates, booleans, bytes, decimals) are not promised.
 */
function keyValueSchema(field: Field): Json {
  if (isInteger(field.column)) return integerSchema();
  if (customSchemaOf(field) || !['number', 'string'].includes(field.column.dataType)) return {};
  return fieldSchema(field);
}

/** A change's `id`: the key's value, or for a composite key the array of its values in key order. */
function changeIdSchema(resource: Resource): Json {
  const [only] = resource.key;
  if (resource.key.length === 1 && only) return keyValueSchema(only);
  const n = resource.key.length;
  return { type: 'array', prefixItems: resource.key.map(keyValueSchema), minItems: n, maxItems: n };
}

/** With authentication on, GET /_changes also opens with a ticket in the query instead of the bearer token. */
const TICKET_SCHEME = {
  type: 'apiKey',
  in: 'query',
  name: 'ticket',
  description: `a ticket from GET /_changes/ticket, valid ${TICKET_TTL_MS / 1000} s: for an EventSource, which cannot send Authorization`,
};

/** The largest seq a client may send (`since`, Last-Event-ID): any a JSON number carries exactly. */
const MAX_SEQ = Number.MAX_SAFE_INTEGER;

/** The Server-Sent Events of GET /_changes, as a client reads them. */
const EVENT_STREAM_FORMAT =
  'Server-Sent Events (https://html.spec.whatwg.org/multipage/server-sent-events.html), endless: first `retry: 1000` and a comment, ' +
  'then one event per change in seq order: `id:` its seq (what Last-Event-ID resumes after), `event:` its op (create, update or delete), ' +
  '`data:` the change as JSON on one line (a feed.change, as the JSON page holds it). A comment line (starting with `:`) comes at least ' +
  'every 15 s (CHANGES_HEARTBEAT_MS) and keeps idle connections open; a change reaches the stream within a second of its commit. ' +
  'A client that reads too slowly is disconnected and resumes with Last-Event-ID.';

/** What a stream sends first, then a delete of one `resource` element, then a heartbeat. */
function eventStreamExample(resource: Resource): string {
  const value = (field: Field) => (keyValueSchema(field).type === 'string' ? 'a1' : 7);
  const id = resource.key.length === 1 ? value(resource.key[0] as Field) : resource.key.map(value);
  const change = { seq: 42, kind: resource.name, id, op: 'delete', at: '2025-01-01T00:00:00.000Z' };
  return `retry: 1000\n: changes after 41\n\nid: 42\nevent: delete\ndata: ${JSON.stringify(change)}\n\n:\n\n`;
}

/**
 * `/_changes` and `/_changes/ticket` (docs/changes.md): the feed as JSON pages or an endless event stream,
 * and the ticket that opens it for an EventSource (which cannot send Authorization). Operations
 * by path and lower-case method; toOpenApi takes those of the methods the app serves there.
 */
function changesPaths(
  registry: Registry,
  options: OpenApiOptions,
): { paths: Record<string, Record<string, Json>>; schemas: Record<string, Json> } {
  const kinds = recordedKinds(registry);
  const names = kinds.map((r) => r.name);
  const json = (schema: Json) => ({ 'application/json': { schema } });
  // Both paths need the token when authentication is on (the read-only one will do); the feed's GET takes a ticket instead.
  const unauthorized = options.auth ? { 401: ref('responses', 'Unauthorized') } : {};
  const rateLimited = options.rateLimit ? { 429: ref('responses', 'TooManyRequests') } : {};
  const schemas: Record<string, Json> = {
    'feed.change': {
      type: 'object',
      description: 'One committed create, update or delete (docs/changes.md)',
      required: ['seq', 'kind', 'id', 'op', 'at'],
      additionalProperties: false,
      properties: {
        seq: { type: 'integer', minimum: 1, description: 'increases in commit order across every process and instance; the event id' },
        kind: { type: 'string', ...(names.length > 0 ? { enum: names } : {}), description: 'the resource kind (table name)' },
        id: { description: "the element's key: its value, or for a composite key the array of its values in key order" },
        op: { type: 'string', enum: ['create', 'update', 'delete'] },
        at: { type: 'string', format: 'date-time', description: 'when the write was made' },
        element: {
          ...(names.length > 0 ? {} : { type: 'object' }),
          description: "the element's current representation (not as of the change); absent when it no longer exists",
        },
      },
      // Each kind's id and element: exactly one branch names the change's kind.
      ...(kinds.length > 0
        ? {
            oneOf: kinds.map((resource) => ({
              properties: { kind: { const: resource.name }, id: changeIdSchema(resource), element: ref('schemas', resource.name) },
            })),
          }
        : {}),
    },
    'feed.ticket': {
      type: 'object',
      required: ['ticket', 'expiresAt'],
      additionalProperties: false,
      properties: {
        ticket: { type: 'string', description: 'pass it as GET /_changes?ticket=…; any instance serving the database accepts it' },
        expiresAt: {
          type: 'string',
          format: 'date-time',
          description: `when it stops opening streams (${TICKET_TTL_MS / 1000} s after it was issued)`,
        },
      },
    },
  };
  const parameters: Json[] = [
    {
      name: 'since',
      in: 'query',
      description:
        'answer the changes after this seq. Default: as JSON, the oldest kept; as an event stream, the current end (only changes committed from now). ' +
        'Older than the changes kept: 410.',
      schema: { type: 'integer', minimum: 0, maximum: MAX_SEQ },
    },
    {
      name: 'limit',
      in: 'query',
      description: 'changes per JSON page (with Accept: text/event-stream it is a 400: a stream has no pages)',
      schema: { type: 'integer', minimum: LIMIT.min, maximum: LIMIT.max, default: LIMIT.default },
    },
    ...(names.length > 0
      ? [
          {
            name: 'kinds',
            in: 'query',
            description: 'comma-separated kinds: only their changes (a kind whose changes are not recorded is a 400)',
            style: 'form',
            explode: false,
            schema: { type: 'array', uniqueItems: true, minItems: 1, items: { type: 'string', enum: names } },
          },
        ]
      : []),
    {
      name: 'ticket',
      in: 'query',
      description:
        'a ticket from GET /_changes/ticket: authenticates the request without an Authorization header (EventSource cannot send one); not valid or expired: 401 (400 without authentication, where it opens nothing)',
      schema: { type: 'string' },
    },
    {
      name: 'Last-Event-ID',
      in: 'header',
      description: `event stream only: resume after this seq, a whole number up to ${MAX_SEQ} (a reconnecting EventSource sends the id of the last event it got); wins over since`,
      schema: { type: 'string', pattern: SEQ_PATTERN },
    },
  ];
  const ok = {
    description: 'A page of changes after since, in seq order (JSON), or the endless stream of them (Accept: text/event-stream)',
    headers: {
      Link: { description: 'RFC 8288 link to the next page (rel="next") while more changes follow (JSON)', schema: { type: 'string' } },
      'Cache-Control': { description: 'no-store (event stream)', schema: { type: 'string' } },
    },
    content: {
      ...json({ type: 'array', items: ref('schemas', 'feed.change') }),
      'text/event-stream': {
        schema: { type: 'string', description: EVENT_STREAM_FORMAT },
        ...(kinds[0] ? { example: eventStreamExample(kinds[0]) } : {}),
      },
    },
  };
  const feed = (method: 'GET' | 'HEAD') => ({
    tags: ['service'],
    operationId: method === 'GET' ? 'changes' : 'changes_head',
    summary: 'The change feed: every committed create, update and delete, in commit order (JSON pages or Server-Sent Events)',
    ...(options.auth ? { security: [{ bearer: [] }, { ticket: [] }] } : {}),
    parameters,
    responses: {
      200: ok,
      400: ref('responses', 'BadRequest'),
      ...(options.auth
        ? {
            401: problem('No valid bearer token and no ticket, or a ticket that is not valid or has expired', {
              'WWW-Authenticate': { schema: { type: 'string' } },
            }),
          }
        : {}),
      405: ref('responses', 'MethodNotAllowed'),
      406: problem('Accept rules out both application/json and text/event-stream'),
      410: ref('responses', 'Gone'),
      ...rateLimited,
      503: ref('responses', 'Unavailable'),
      default: ref('responses', 'Error'),
    },
  });
  const ticket = (method: 'GET' | 'HEAD') => ({
    tags: ['service'],
    operationId: method === 'GET' ? 'changes_ticket' : 'changes_ticket_head',
    summary: `A ticket that opens GET /_changes?ticket=… for ${TICKET_TTL_MS / 1000} s without an Authorization header (for EventSource)`,
    responses: {
      200: {
        description: 'A new ticket; never cached',
        headers: { 'Cache-Control': { schema: { type: 'string', const: 'no-store' } } },
        content: json(ref('schemas', 'feed.ticket')),
      },
      400: ref('responses', 'BadRequest'),
      405: ref('responses', 'MethodNotAllowed'),
      406: ref('responses', 'NotAcceptable'),
      ...unauthorized,
      ...rateLimited,
      default: ref('responses', 'Error'),
    },
  });
  const optionsOf = (id: string) => ({
    tags: ['service'],
    operationId: `${id}_options`,
    summary: 'The methods this path supports',
    responses: {
      204: noBody('Allow lists the methods', { Allow: ref('headers', 'Allow') }),
      400: ref('responses', 'BadRequest'),
      ...unauthorized,
      ...rateLimited,
      405: ref('responses', 'MethodNotAllowed'),
      default: ref('responses', 'Error'),
    },
  });
  return {
    paths: {
      [CHANGES_PATH]: { get: feed('GET'), head: feed('HEAD'), options: optionsOf('changes') },
      [TICKET_PATH]: { get: ticket('GET'), head: ticket('HEAD'), options: optionsOf('changes_ticket') },
    },
    schemas,
  };
}

/**
 * With RATE_LIMIT on, every response of every operation may carry the RateLimit fields: added to each
 * inline response of `paths` (in place) and to copies of the shared `responses`, which are returned.
 */
function withRateLimitHeaders(paths: Record<string, Json>, responses: Record<string, Json>): Record<string, Json> {
  const add = (response: Json) => ({ ...response, headers: { ...(response.headers as Json | undefined), ...RATE_LIMIT_HEADERS } });
  for (const [path, item] of Object.entries(paths)) {
    if (PROBE_PATHS.has(path)) continue; // never limited: their answers carry no RateLimit fields
    for (const operation of Object.values(item) as Json[]) {
      const answers = operation.responses as Record<string, Json>;
      for (const [status, response] of Object.entries(answers)) if (!('$ref' in response)) answers[status] = add(response);
    }
  }
  return Object.fromEntries(Object.entries(responses).map(([name, response]) => [name, add(response)]));
}

/**
 * Makes every operationId an identifier code generators take (a table name may hold spaces or any
 * character: each other character becomes `_`), and unique in the document (a second `a_b` becomes `a_b_2`).
 */
function identifyOperations(paths: Record<string, Json>): void {
  const seen = new Set<string>();
  for (const item of Object.values(paths)) {
    for (const operation of Object.values(item) as Json[]) {
      const base = String(operation.operationId).replace(/[^A-Za-z0-9_]/g, '_');
      let id = base;
      for (let n = 2; seen.has(id); n++) id = `${base}_${n}`;
      seen.add(id);
      operation.operationId = id;
    }
  }
}

/** Builds the OpenAPI 3.1 document of every route the registry (and the service) serves. */
export function toOpenApi(registry: Registry, options: OpenApiOptions = {}): Json {
  const paths: Record<string, Json> = {};
  // The change feed's paths have operations of their own; every other service path is a plain GET.
  const feed = changesPaths(registry, options);
  for (const service of options.services ?? []) {
    paths[service.path] = Object.fromEntries(
      service.methods.map((m) => [m.toLowerCase(), feed.paths[service.path]?.[m.toLowerCase()] ?? serviceOperation(service, m, options)]),
    );
  }
  const withFeed = CHANGES_PATH in paths || TICKET_PATH in paths;
  const batch = batchPath(options);
  paths[BATCH_PATH] = batch.path;
  const listed = new Map<Resource, Json[]>();
  const lists = (resource: Resource) => {
    let parameters = listed.get(resource);
    if (!parameters) {
      parameters = listParameters(resource);
      listed.set(resource, parameters);
    }
    return parameters;
  };
  for (const route of registry.routes) {
    paths[route.path] = Object.fromEntries(route.methods.map((m) => [m.toLowerCase(), operation(route, m, options, lists)]));
  }
  const schemas: Record<string, Json> = {
    ...batch.schemas,
    ...(withFeed ? feed.schemas : {}),
    Problem: {
      type: 'object',
      description: 'RFC 9457 problem details',
      required: ['type', 'title', 'status', 'detail', 'instance', 'code'],
      properties: {
        type: { type: 'string' },
        title: { type: 'string' },
        status: { type: 'integer' },
        detail: { type: 'string' },
        instance: { type: 'string' },
        code: { type: 'string', description: 'the class of failure (docs/http-api.md#problem-codes)', enum: Object.keys(PROBLEM_CODES) },
        errors: {
          type: 'array',
          items: { type: 'object', required: ['path', 'message'], properties: { path: { type: 'string' }, message: { type: 'string' } } },
        },
      },
    },
  };
  const parameters: Record<string, Json> = {
    limit: { name: 'limit', in: 'query', schema: { type: 'integer', minimum: LIMIT.min, maximum: LIMIT.max, default: LIMIT.default } },
    cursor: { name: 'cursor', in: 'query', description: 'opaque; from the Link header of the previous page', schema: { type: 'string' } },
    count: { name: 'count', in: 'query', description: 'true adds X-Total-Count', schema: { type: 'boolean', default: false } },
    'If-Match': { name: 'If-Match', in: 'header', schema: { type: 'string' } },
    'If-None-Match': {
      name: 'If-None-Match',
      in: 'header',
      description: 'on GET/HEAD: 304 when it matches; on a write: 412 when it matches',
      schema: { type: 'string' },
    },
    'Idempotency-Key': {
      name: 'Idempotency-Key',
      in: 'header',
      description: 'retries with the same key and body replay the first response',
      // 1–255 visible ASCII characters, or the same as a quoted structured-field string (src/request/idempotency.ts): a value
      // in quotes is the key between them, so `""` is an empty key.
      schema: { type: 'string', pattern: '^("[\\x21-\\x7e]{1,255}"|(?!".*"$)[\\x21-\\x7e]{1,255})$' },
    },
  };
  for (const resource of registry.resources) {
    // Each schema is built once per kind and reused by the ones derived from it (none is changed in place).
    const element = elementSchema(resource);
    schemas[resource.name] = withExpansions(resource, element);
    const search = searchParameter(resource);
    if (search) parameters[searchComponent(resource)] = search;
    if (resource.readOnlyKind) continue;
    const create = jsonSchema(resource.createSchema);
    const replace = replaceSchema(resource, element);
    schemas[`${resource.name}.create`] = create;
    schemas[`${resource.name}.replace`] = replace;
    schemas[`${resource.name}.patch`] = patchSchema(resource, replace);
    for (const { field, parent } of resource.foreignKeys) {
      schemas[`${resource.name}.create.${field}`] = relatedCreateSchema(create, field, parent.name);
    }
    const composite = resource.key.length > 1;
    parameters[`${resource.name}Id`] = {
      name: 'id',
      in: 'path',
      required: true,
      description: composite
        ? `the key of an element of ${resource.name}: ${resource.key.map((f) => f.key).join(', ')}, in this order, joined by "," (a "," or "%" in a value percent-encoded)`
        : `the key of an element of ${resource.name}`,
      // A composite key is a list of the key's values, serialized as OpenAPI's simple style writes an array: joined
      // by ",", each value percent-encoded (a client that encoded the whole string would encode the commas too).
      ...(composite
        ? {
            style: 'simple',
            explode: false,
            schema: {
              type: 'array',
              prefixItems: resource.key.map(fieldSchema),
              items: { type: 'string' }, // none beyond the prefix (maxItems); tools ask for an items schema
              minItems: resource.key.length,
              maxItems: resource.key.length,
            },
          }
        : { schema: fieldSchema(resource.key[0] as Field) }),
    };
  }
  const responses = options.rateLimit ? withRateLimitHeaders(paths, COMMON_RESPONSES) : COMMON_RESPONSES;
  identifyOperations(paths);
  return {
    openapi: '3.1.0',
    info: {
      title: options.title ?? 'restable',
      version: options.version ?? '0.0.0',
      description: 'REST API derived from the SQLite schema.',
    },
    paths,
    components: {
      schemas: byComponentName(schemas),
      parameters: byComponentName(parameters),
      responses,
      headers: {
        Location: { description: 'the path of the created element', schema: { type: 'string' } },
        ETag: { description: 'strong entity tag of the element', schema: { type: 'string' } },
        Link: { description: 'RFC 8288 link to the next page (rel="next")', schema: { type: 'string' } },
        'X-Total-Count': { description: 'rows matching the filters and q (count=true)', schema: { type: 'integer' } },
        Allow: { description: 'the methods this path supports', schema: { type: 'string' } },
        'Idempotent-Replayed': {
          description:
            'true when the answer is the stored one of an earlier request with the same Idempotency-Key (nothing was created again)',
          schema: { type: 'string', const: 'true' },
        },
      },
      ...(options.auth
        ? {
            securitySchemes: {
              bearer: { type: 'http', scheme: 'bearer' },
              ...(withFeed ? { ticket: TICKET_SCHEME } : {}),
            },
          }
        : {}),
    },
    ...(options.auth ? { security: [{ bearer: [] }] } : {}),
    tags: [...registry.resources.map((r) => ({ name: r.name })), { name: 'service' }],
  };
}
