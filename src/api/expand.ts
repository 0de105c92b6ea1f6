// Adds the relations `expand=` names to a page of elements (docs/http-api.md#query-parameters-collections-and-related-lists): one query per relation and level
// for the whole page (its keys as one bound list), never one per element; synchronous on a synchronous store.

import { type MaybePromise, type Transaction, then } from '../engine/store.js';
import { ApiError } from '../errors.js';
import type { Field, Resource } from '../model/registry.js';
import type { ExpandNode } from '../request/list-query.js';
import type { Row } from '../request/validation.js';

/** The children a to-many relation adds to one element at most (its related path pages through the rest). */
export const MAX_CHILDREN = 100;
/** The elements all expansions of one response may add together: past it the request is a 400, not a huge answer. */
export const MAX_EXPANDED = 20_000;

/** Each distinct non-null value of `field` among `rows`. */
function valuesOf(rows: Row[], field: string): unknown[] {
  const values = new Set<unknown>();
  for (const row of rows) {
    const value = row[field];
    if (value !== null && value !== undefined) values.add(value);
  }
  return [...values];
}

/**
 * Counts the elements the expansions of one response have added so far, each as many times as the
 * response holds it, and refuses past MAX_EXPANDED.
 */
class Budget {
  private added = 0;
  take(copies: Map<Row, number>): void {
    for (const count of copies.values()) this.added += count;
    if (this.added > MAX_EXPANDED) {
      throw new ApiError(
        'badRequest',
        `Query parameter "expand" would add more than ${MAX_EXPANDED} elements to this response; ask for fewer (a smaller limit or fewer relations).`,
        { errors: [{ path: 'expand', message: `adds more than ${MAX_EXPANDED} elements` }], problemCode: 'bad-query' },
      );
    }
  }
}

/**
 * How many times each row appears in the response: an element found once may be the relation of many
 * rows (the owner of every pet on the page), and it is written out, with all it holds, once for each.
 * Rows of the page itself (no map) appear once.
 */
type Copies = Map<Row, number> | undefined;

/** Adds one relation to `rows` (elements of `resource`), then its own nested ones to what it added. */
function expandOne(
  store: Transaction,
  resource: Resource,
  rows: Row[],
  copies: Copies,
  node: ExpandNode,
  budget: Budget,
): MaybePromise<void> {
  const { name, cardinality, target, field } = node.expansion;
  const kind = store.of(target);
  const added = new Map<Row, number>();
  if (cardinality === 'one') {
    const key = (target.key[0] as Field).key;
    const values = valuesOf(rows, field);
    return then(values.length === 0 ? [] : kind.withKeys(values), (found) => {
      const byKey = new Map(found.map((parent) => [parent[key], parent]));
      for (const row of rows) {
        const parent = byKey.get(row[field]) ?? null;
        row[name] = parent;
        if (parent) added.set(parent, (added.get(parent) ?? 0) + (copies?.get(row) ?? 1));
      }
      budget.take(added);
      return expandAll(store, target, found, added, node.children, budget);
    }) as MaybePromise<void>; // a promise of a promise settles as one
  }
  const key = (resource.key[0] as Field).key;
  return then(rows.length === 0 ? [] : kind.withParents(field, valuesOf(rows, key), MAX_CHILDREN), (found) => {
    const groups = new Map<unknown, Row[]>();
    for (const child of found) {
      const group = groups.get(child[field]);
      if (group) group.push(child);
      else groups.set(child[field], [child]);
    }
    for (const row of rows) {
      const children = groups.get(row[key]) ?? [];
      row[name] = children;
      for (const child of children) added.set(child, (added.get(child) ?? 0) + (copies?.get(row) ?? 1));
    }
    budget.take(added);
    return expandAll(store, target, found, added, node.children, budget);
  }) as MaybePromise<void>;
}

/** Adds every relation of `nodes` to `rows`, one after the other. */
function expandAll(
  store: Transaction,
  resource: Resource,
  rows: Row[],
  copies: Copies,
  nodes: ExpandNode[],
  budget: Budget,
): MaybePromise<void> {
  for (let i = 0; i < nodes.length; i++) {
    const done = expandOne(store, resource, rows, copies, nodes[i] as ExpandNode, budget);
    if (done instanceof Promise) return done.then(() => expandAll(store, resource, rows, copies, nodes.slice(i + 1), budget));
  }
  return undefined;
}

/**
 * Adds the relations of `nodes` to `rows` (elements of `resource`, changed in place): a to-one
 * relation as its element or null, a to-many one as an array of at most MAX_CHILDREN children in
 * key order.
 * @throws {ApiError} 400 when the response would hold more than MAX_EXPANDED added elements
 */
export function expand(store: Transaction, resource: Resource, rows: Row[], nodes: ExpandNode[] | undefined): MaybePromise<void> {
  return nodes?.length ? expandAll(store, resource, rows, undefined, nodes, new Budget()) : undefined;
}
