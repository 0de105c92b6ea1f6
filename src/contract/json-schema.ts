// Pure: checks a JSON value against a JSON Schema (draft 2020-12) of an OpenAPI 3.1 document, for the
// contract checker. The keywords documents use for data; annotations and unknown keywords are ignored.

type Schema = Record<string, any>;

/** RFC 3339 date-times (`format: date-time`). */
const DATE_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i;

const typeOf = (value: unknown): string => {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
};

/** Whether `value` is of JSON type `type` (an integer is a number without a fraction). */
function isType(value: unknown, type: string): boolean {
  if (type === 'integer') return Number.isInteger(value);
  if (type === 'number') return typeof value === 'number' && Number.isFinite(value);
  return typeOf(value) === type;
}

/** JSON equality (enum, const, uniqueItems): members in any order. */
function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeOf(a) !== typeOf(b) || typeof a !== 'object' || a === null) return false;
  if (Array.isArray(a)) return a.length === (b as unknown[]).length && a.every((item, i) => same(item, (b as unknown[])[i]));
  const keys = Object.keys(a);
  const other = b as Record<string, unknown>;
  return (
    keys.length === Object.keys(other).length && keys.every((key) => key in other && same((a as Record<string, unknown>)[key], other[key]))
  );
}

const pointer = (at: string, key: string | number) => `${at}/${String(key).replace(/~/g, '~0').replace(/\//g, '~1')}`;

/**
 * The ways `value` breaks `schema`, each as "<JSON pointer>: <what>" (none: it conforms). `resolve`
 * follows a `$ref` to its target (the document's own resolver); the schema is read as given otherwise.
 */
export function schemaErrors(schema: unknown, value: unknown, resolve: (node: any) => any = (node) => node, at = ''): string[] {
  const s: Schema | boolean | undefined = resolve(schema);
  if (s === undefined || s === true) return [];
  if (s === false) return [`${at || '/'}: no value is allowed here`];
  const errors: string[] = [];
  const fail = (message: string) => errors.push(`${at || '/'}: ${message}`);

  if (s.type !== undefined) {
    const types: string[] = Array.isArray(s.type) ? s.type : [s.type];
    if (!types.some((type) => isType(value, type))) {
      fail(`must be ${types.join(' or ')}, not ${typeOf(value)}`);
      return errors; // the other keywords would only repeat it
    }
  }
  if (Array.isArray(s.enum) && !s.enum.some((option: unknown) => same(option, value))) fail(`must be one of ${JSON.stringify(s.enum)}`);
  if ('const' in s && !same(s.const, value)) fail(`must be ${JSON.stringify(s.const)}`);

  if (typeof value === 'number') {
    if (typeof s.minimum === 'number' && value < s.minimum) fail(`must be ≥ ${s.minimum}`);
    if (typeof s.maximum === 'number' && value > s.maximum) fail(`must be ≤ ${s.maximum}`);
    if (typeof s.exclusiveMinimum === 'number' && value <= s.exclusiveMinimum) fail(`must be > ${s.exclusiveMinimum}`);
    if (typeof s.exclusiveMaximum === 'number' && value >= s.exclusiveMaximum) fail(`must be < ${s.exclusiveMaximum}`);
  }
  if (typeof value === 'string') {
    const length = [...value].length;
    if (typeof s.minLength === 'number' && length < s.minLength) fail(`must be at least ${s.minLength} characters long`);
    if (typeof s.maxLength === 'number' && length > s.maxLength) fail(`must be at most ${s.maxLength} characters long`);
    if (typeof s.pattern === 'string' && !new RegExp(s.pattern, 'u').test(value)) fail(`must match ${s.pattern}`);
    if (s.format === 'date-time' && !(DATE_TIME.test(value) && !Number.isNaN(Date.parse(value)))) fail('must be an RFC 3339 date-time');
  }
  if (Array.isArray(value)) {
    if (typeof s.minItems === 'number' && value.length < s.minItems) fail(`must have at least ${s.minItems} items`);
    if (typeof s.maxItems === 'number' && value.length > s.maxItems) fail(`must have at most ${s.maxItems} items`);
    if (s.uniqueItems === true && value.some((item, i) => value.findIndex((other) => same(other, item)) !== i))
      fail('must not repeat an item');
    const prefix: unknown[] = Array.isArray(s.prefixItems) ? s.prefixItems : [];
    value.forEach((item, i) => {
      const itemSchema = i < prefix.length ? prefix[i] : s.items;
      errors.push(...schemaErrors(itemSchema, item, resolve, pointer(at, i)));
    });
  }
  if (typeOf(value) === 'object') {
    const object = value as Record<string, unknown>;
    for (const key of s.required ?? []) if (!(key in object)) fail(`must have ${JSON.stringify(key)}`);
    const properties: Schema = s.properties ?? {};
    for (const [key, member] of Object.entries(object)) {
      if (key in properties) errors.push(...schemaErrors(properties[key], member, resolve, pointer(at, key)));
      else if (s.additionalProperties !== undefined)
        errors.push(...schemaErrors(s.additionalProperties, member, resolve, pointer(at, key)));
    }
    if (s.propertyNames !== undefined)
      for (const key of Object.keys(object)) errors.push(...schemaErrors(s.propertyNames, key, resolve, pointer(at, key)));
  }

  for (const branch of s.allOf ?? []) errors.push(...schemaErrors(branch, value, resolve, at));
  for (const keyword of ['anyOf', 'oneOf'] as const) {
    if (!Array.isArray(s[keyword])) continue;
    const outcomes = (s[keyword] as unknown[]).map((branch) => schemaErrors(branch, value, resolve, at));
    const matching = outcomes.filter((found) => found.length === 0).length;
    if (matching === 1 || (matching > 1 && keyword === 'anyOf')) continue;
    if (matching > 1) fail(`must match exactly one of the oneOf schemas, not ${matching}`);
    else {
      // None matches: the branch that came closest (the first of those) says why.
      const closest = [...outcomes].sort((a, b) => a.length - b.length)[0];
      if (closest) errors.push(...closest);
      else fail(`${keyword} lists no schema`);
    }
  }
  if (s.not !== undefined && schemaErrors(s.not, value, resolve, at).length === 0) fail('must not match the not schema');
  return errors;
}
