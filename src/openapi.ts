// Pure: registry → OpenAPI 3.1 document. Paths, methods, parameters (the §5 query language
// included), schemas from the same zod validators the router uses, headers and every status.
import { createSelectSchema } from 'drizzle-zod';
import { z } from 'zod';
import { LIMIT, OPERATORS, type Operator } from './query.js';
import type { Field, Method, Registry, Resource, Route } from './resources.js';

type Json = Record<string, unknown>;

export interface OpenApiOptions {
  title?: string;
  version?: string;
  /** Whether bearer authentication is on (adds the security scheme and 401/403). */
  auth?: boolean;
  /** The service's own endpoints (index, health, docs) with their methods. */
  services?: { path: string; methods: readonly Method[]; summary: string; produces: string }[];
}

const ref = (kind: 'schemas' | 'responses' | 'headers' | 'parameters', name: string) => ({ $ref: `#/components/${kind}/${name}` });

function jsonSchema(schema: z.ZodType): Json {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as Json;
  return rest;
}

/** The element schema, read-only fields marked, server-managed timestamps as date-times. */
function elementSchema(resource: Resource): Json {
  const schema = jsonSchema(createSelectSchema(resource.table));
  const properties = schema.properties as Record<string, Json>;
  for (const field of resource.fields) {
    if (!field.readOnly) continue;
    properties[field.key] = { ...properties[field.key], readOnly: true };
    if (field !== resource.primaryKey) properties[field.key] = { ...properties[field.key], format: 'date-time' };
  }
  return schema;
}

/** A PUT body: the writable fields, plus read-only ones that may only repeat their current value. */
function replaceSchema(resource: Resource): Json {
  const schema = jsonSchema(resource.replaceSchema);
  const element = elementSchema(resource).properties as Record<string, Json>;
  const properties = { ...(schema.properties as Json) };
  for (const key of resource.readOnly) properties[key] = element[key];
  return { ...schema, properties };
}

/** A merge patch: every writable field optional; null removes (takes the default, or 422 if required). */
function patchSchema(resource: Resource): Json {
  const { required: _, ...schema } = replaceSchema(resource);
  const properties = Object.fromEntries(
    Object.entries(schema.properties as Record<string, Json>).map(([key, value]) => [
      key,
      value.readOnly ? value : { anyOf: [value, { type: 'null' }] },
    ]),
  );
  return { ...schema, properties, description: 'JSON Merge Patch (RFC 7396): members set fields, null removes them.' };
}

function fieldSchema(field: Field): Json {
  const { column } = field;
  if (column.dataType === 'number') return { type: column.columnType === 'SQLiteInteger' ? 'integer' : 'number' };
  if (column.dataType === 'boolean') return { type: 'boolean' };
  if (column.enumValues?.length) return { type: 'string', enum: column.enumValues };
  return { type: 'string' };
}

function operatorsOf(field: Field): Operator[] {
  const text = field.column.dataType === 'string';
  return OPERATORS.filter((op) => text || (op !== 'contains' && op !== 'startsWith'));
}

/** The §5 query language of a list: paging, sort, count, and every filter of every scalar field. */
function listParameters(resource: Resource): Json[] {
  const scalar = resource.fields.filter((f) => ['number', 'boolean', 'string', 'date'].includes(f.column.dataType));
  const filters = scalar.flatMap((field) => [
    { name: field.key, in: 'query', description: `${field.key} equals`, schema: fieldSchema(field) },
    ...operatorsOf(field).map((op) => ({
      name: `${field.key}[${op}]`,
      in: 'query',
      description: `filter ${field.key} with ${op}${op === 'in' ? ' (comma-separated values)' : ''}`,
      schema: op === 'null' ? { type: 'boolean' } : op === 'in' ? { type: 'string' } : fieldSchema(field),
    })),
  ]);
  const sortable = scalar.map((f) => f.key).join('|');
  return [
    ref('parameters', 'limit'),
    ref('parameters', 'cursor'),
    {
      name: 'sort',
      in: 'query',
      description: 'comma-separated fields, "-" for descending; ties broken by the key',
      schema: { type: 'string', pattern: `^-?(${sortable})(,-?(${sortable}))*$` },
    },
    ref('parameters', 'count'),
    ...filters,
  ];
}

const problem = (description: string, headers?: Json) => ({
  description,
  ...(headers ? { headers } : {}),
  content: { 'application/problem+json': { schema: ref('schemas', 'Problem') } },
});

/** Every documented error answer (an application/problem+json body): its status, meaning and headers. */
const ERRORS = {
  BadRequest: [400, 'A malformed body or query parameter'],
  Unauthorized: [401, 'No valid bearer token', { 'WWW-Authenticate': { schema: { type: 'string' } } }],
  Forbidden: [403, 'The read-only token may not write'],
  NotFound: [404, 'No element with that id, or no parent for a related path'],
  MethodNotAllowed: [405, 'The path does not define the method used; Allow lists the ones it does', { Allow: ref('headers', 'Allow') }],
  NotAcceptable: [406, 'Accept rules out application/json'],
  Conflict: [409, 'A unique value is taken, or other elements still reference this one'],
  PreconditionFailed: [412, 'If-Match does not match the current ETag', { ETag: ref('headers', 'ETag') }],
  PayloadTooLarge: [413, 'The body is larger than the configured limit'],
  UnsupportedMediaType: [415, 'The body is not JSON'],
  Unprocessable: [422, 'The body breaks the schema; errors names each field'],
  Error: ['default', 'Unexpected failure (500) or not ready (503)'],
} as const satisfies Record<string, readonly [number | 'default', string, Json?]>;
type ErrorName = keyof typeof ERRORS;

const COMMON_RESPONSES = Object.fromEntries(
  Object.entries(ERRORS).map(([name, [, description, headers]]) => [name, problem(description, headers as Json | undefined)]),
);

const noBody = (description: string, headers?: Json) => ({ description, ...(headers ? { headers } : {}) });

function operation(route: Route, method: Method, options: OpenApiOptions): Json {
  const { resource, relation, kind } = route;
  const name = relation ? `${relation.parent.name}_${relation.name}` : resource.name;
  /** The responses of these errors, plus 405 and (with authentication) 401/403, keyed by status. */
  const errors = (...names: ErrorName[]) =>
    Object.fromEntries(
      [...names, 'MethodNotAllowed' as const, ...(options.auth ? (['Unauthorized', 'Forbidden'] as const) : [])].map((name) => [
        ERRORS[name][0],
        ref('responses', name),
      ]),
    );
  const element = ref('schemas', resource.name);
  const json = (schema: Json) => ({ 'application/json': { schema } });
  const idParam =
    kind === 'collection'
      ? []
      : [ref('parameters', `${kind === 'element' ? resource.name : (relation as NonNullable<Route['relation']>).parent.name}Id`)];
  const parent = kind === 'related' ? ['NotFound' as const] : [];
  const list = kind !== 'element';
  const base = { tags: [resource.name], parameters: idParam };
  switch (method) {
    case 'GET':
    case 'HEAD': {
      const ok = list
        ? {
            description: `A page of ${resource.name}`,
            headers: { Link: ref('headers', 'Link'), 'X-Total-Count': ref('headers', 'X-Total-Count') },
            ...(method === 'GET' ? { content: json({ type: 'array', items: element }) } : {}),
          }
        : {
            description: `The ${resource.name} element`,
            headers: { ETag: ref('headers', 'ETag') },
            ...(method === 'GET' ? { content: json(element) } : {}),
          };
      return {
        ...base,
        operationId: `${method === 'GET' ? (list ? 'list' : 'get') : 'head'}_${name}${list ? '' : '_element'}`,
        summary: list
          ? `List ${resource.name}${relation ? ` of one ${relation.parent.name} element` : ''}`
          : `Get one ${resource.name} element`,
        parameters: [...idParam, ...(list ? listParameters(resource) : [ref('parameters', 'If-None-Match')])],
        responses: {
          200: ok,
          ...(list ? {} : { 304: noBody('Not modified (If-None-Match matched)', { ETag: ref('headers', 'ETag') }) }),
          ...errors(...(list ? (['BadRequest'] as const) : []), ...(list ? parent : (['NotFound'] as const)), 'NotAcceptable', 'Error'),
        },
      };
    }
    case 'POST':
      return {
        ...base,
        operationId: `create_${name}`,
        summary: `Create a ${resource.name} element${relation ? ` with ${relation.field} from the path` : ''}`,
        parameters: [...idParam, ref('parameters', 'Idempotency-Key')],
        requestBody: { required: true, content: json(ref('schemas', `${resource.name}.create`)) },
        responses: {
          201: {
            description: 'Created',
            headers: { Location: ref('headers', 'Location'), ETag: ref('headers', 'ETag') },
            content: json(element),
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
        summary: method === 'PUT' ? `Replace a ${resource.name} element` : `Merge-patch a ${resource.name} element`,
        parameters: [...idParam, ref('parameters', 'If-Match')],
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
        summary: `Delete a ${resource.name} element`,
        parameters: [...idParam, ref('parameters', 'If-Match')],
        responses: { 204: noBody('Deleted'), ...errors('NotFound', 'Conflict', 'PreconditionFailed', 'Error') },
      };
    case 'OPTIONS':
      return {
        ...base,
        operationId: `options_${name}${kind === 'element' ? '_element' : ''}`,
        summary: 'The methods this path supports',
        responses: {
          204: noBody('Allow lists the methods', { Allow: ref('headers', 'Allow') }),
          ...errors(...(kind === 'collection' ? [] : (['NotFound'] as const)), 'Error'),
        },
      };
  }
}

function serviceOperation(path: string, method: Method, summary: string, produces: string): Json {
  const id = path === '/' ? 'index' : path.replace(/[^a-z]/g, '');
  if (method === 'OPTIONS')
    return {
      tags: ['service'],
      operationId: `options_${id}`,
      summary: 'The methods this path supports',
      responses: { 204: noBody('Allow lists the methods', { Allow: ref('headers', 'Allow') }), 405: ref('responses', 'MethodNotAllowed') },
    };
  const content =
    method === 'GET'
      ? { content: { [produces]: { schema: produces === 'application/json' ? { type: 'object' } : { type: 'string' } } } }
      : {};
  return {
    tags: ['service'],
    operationId: `${method.toLowerCase()}_${id}`,
    summary,
    responses: { 200: { description: summary, ...content }, 405: ref('responses', 'MethodNotAllowed'), default: ref('responses', 'Error') },
  };
}

/** Builds the OpenAPI 3.1 document of every route the registry (and the service) serves. */
export function toOpenApi(registry: Registry, options: OpenApiOptions = {}): Json {
  const paths: Record<string, Json> = {};
  for (const { path, methods, summary, produces } of options.services ?? []) {
    paths[path] = Object.fromEntries(methods.map((m) => [m.toLowerCase(), serviceOperation(path, m, summary, produces)]));
  }
  for (const route of registry.routes) {
    paths[route.path] = Object.fromEntries(route.methods.map((m) => [m.toLowerCase(), operation(route, m, options)]));
  }
  const schemas: Record<string, Json> = {
    Problem: {
      type: 'object',
      description: 'RFC 9457 problem details',
      required: ['type', 'title', 'status', 'detail', 'instance'],
      properties: {
        type: { type: 'string' },
        title: { type: 'string' },
        status: { type: 'integer' },
        detail: { type: 'string' },
        instance: { type: 'string' },
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
    'If-None-Match': { name: 'If-None-Match', in: 'header', schema: { type: 'string' } },
    'Idempotency-Key': {
      name: 'Idempotency-Key',
      in: 'header',
      description: 'retries with the same key and body replay the first response',
      schema: { type: 'string', minLength: 1, maxLength: 255 },
    },
  };
  for (const resource of registry.resources) {
    schemas[resource.name] = elementSchema(resource);
    schemas[`${resource.name}.create`] = jsonSchema(resource.createSchema);
    schemas[`${resource.name}.replace`] = replaceSchema(resource);
    schemas[`${resource.name}.patch`] = patchSchema(resource);
    parameters[`${resource.name}Id`] = {
      name: 'id',
      in: 'path',
      required: true,
      description: `the ${resource.name} key`,
      schema: fieldSchema(resource.primaryKey),
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: options.title ?? 'restable',
      version: options.version ?? '0.0.0',
      description: 'REST API derived from the SQLite schema.',
    },
    paths,
    components: {
      schemas,
      parameters,
      responses: COMMON_RESPONSES,
      headers: {
        Location: { description: 'the path of the created element', schema: { type: 'string' } },
        ETag: { description: 'strong entity tag of the element', schema: { type: 'string' } },
        Link: { description: 'RFC 8288 link to the next page (rel="next")', schema: { type: 'string' } },
        'X-Total-Count': { description: 'rows matching the filters (count=true)', schema: { type: 'integer' } },
        Allow: { description: 'the methods this path supports', schema: { type: 'string' } },
      },
      ...(options.auth ? { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } } : {}),
    },
    ...(options.auth ? { security: [{ bearer: [] }] } : {}),
    tags: [...registry.resources.map((r) => ({ name: r.name })), { name: 'service' }],
  };
}
