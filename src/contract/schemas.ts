// Checks JSON values against the schemas of an OpenAPI 3.1 document, for the contract checker: Ajv's
// JSON Schema 2020-12 validator (the dialect OpenAPI 3.1 uses) with ajv-formats (`date-time` and the rest).
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';

/** The id the document is registered under: its `#/...` references resolve against it. */
const DOCUMENT_ID = 'openapi:document';

/** A JSON pointer's reference token, escaped (RFC 6901) and made safe for a URI fragment (RFC 3986). */
const token = (key: string) => encodeURIComponent(key.replace(/~/g, '~0').replace(/\//g, '~1'));

/**
 * A checker of values against schemas of `doc`: `(schema, value)` gives the ways `value` breaks
 * `schema`, each as "<JSON pointer>: <Ajv's message>" (none: it conforms; no schema: none). A schema
 * found in the document is checked where it stands, so its `$ref`s (top level or nested in inline
 * schemas) resolve against the document; another schema's `#/...` references point into the document
 * too. Each schema is compiled once. OpenAPI's annotations (`example`, `discriminator`, …) are ignored.
 */
export function schemaChecker(doc: object): (schema: unknown, value: unknown) => string[] {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  formats.default(ajv);
  // restable's own format (exact decimals as text, NUMERIC columns), whose `pattern` beside it says what it
  // takes: known, so that Ajv does not warn of an unknown format on every such schema.
  ajv.addFormat('decimal', true);
  ajv.addSchema(doc, DOCUMENT_ID);

  /** Where each object of the document stands (its JSON pointer), found on first use. */
  let pointers: WeakMap<object, string> | undefined;
  const pointerOf = (node: object): string | undefined => {
    if (!pointers) {
      const found = new WeakMap<object, string>();
      const walk = (at: unknown, pointer: string) => {
        if (!at || typeof at !== 'object' || found.has(at)) return;
        found.set(at, pointer);
        for (const [key, member] of Object.entries(at)) walk(member, `${pointer}/${token(key)}`);
      };
      walk(doc, '');
      pointers = found;
    }
    return pointers.get(node);
  };

  /** A schema from elsewhere, with its local references (`#/...`) pointed at the document. */
  const anchored = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(anchored);
    if (!node || typeof node !== 'object') return node;
    return Object.fromEntries(
      Object.entries(node).map(([key, member]) => [
        key,
        key === '$ref' && typeof member === 'string' && member.startsWith('#') ? DOCUMENT_ID + member : anchored(member),
      ]),
    );
  };

  const compiled = new WeakMap<object, ValidateFunction>();
  const validatorFor = (schema: unknown): ValidateFunction => {
    if (!schema || typeof schema !== 'object') return ajv.compile(schema as boolean);
    let validate = compiled.get(schema);
    if (!validate) {
      const pointer = pointerOf(schema);
      validate = ajv.compile(pointer === undefined ? (anchored(schema) as object) : { $ref: `${DOCUMENT_ID}#${pointer}` });
      compiled.set(schema, validate);
    }
    return validate;
  };

  return (schema, value) => {
    if (schema === undefined) return [];
    const validate = validatorFor(schema);
    if (validate(value)) return [];
    return (validate.errors ?? []).map((error) => `${error.instancePath || '/'}: ${error.message ?? error.keyword}`);
  };
}
