// Unit suite of the configuration page: docs/configuration.md holds the table `npm run docs:config`
// writes from src/config.ts, so a variable added or reworded there without regenerating fails here.
import { readFileSync } from 'node:fs';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { BEGIN, configTable, END, PAGE, renderPage } from '../../src/cli/config-doc.js';
import { UsageError } from '../../src/cli/usage.js';
import { accepted, VARIABLES } from '../../src/config.js';

const test = suite('configuration page');
const page = readFileSync(PAGE, 'utf8');

test('docs/configuration.md is exactly what `npm run docs:config` writes from src/config.ts', () => {
  assert.fixture(page, renderPage(page));
});

test('a variable added to config.ts without regenerating makes the page differ', () => {
  const added = { ...VARIABLES, extra: { env: 'EXTRA_THING', default: '7', doc: 'a new knob', schema: VARIABLES.workers.schema } };
  const written = renderPage(page, added);
  assert.is.not(written, page);
  assert.ok(written.includes('| `EXTRA_THING` | `7` | an integer from 1 to 64 | a new knob |'));
});

test('each variable has one row: its name, its default (or unset), what it accepts and its doc', () => {
  const rows = configTable().split('\n').slice(2);
  assert.is(rows.length, Object.keys(VARIABLES).length);
  for (const [i, variable] of Object.values(VARIABLES).entries()) {
    const shown = variable.default === undefined ? 'unset' : `\`${variable.default}\``;
    assert.is(rows[i], `| \`${variable.env}\` | ${shown} | ${accepted(variable.schema)} | ${variable.doc} |`, variable.env);
  }
});

test('a | in a doc is escaped, so it cannot split the row', () => {
  const table = configTable({ x: { env: 'X', default: undefined, doc: 'a | b', schema: VARIABLES.workers.schema } });
  assert.ok(table.endsWith('| `X` | unset | an integer from 1 to 64 | a \\| b |'), table);
});

test('a page without its markers is refused with a line that names them', () => {
  assert.throws(
    () => renderPage('# Configuration\n'),
    (error: Error) => error instanceof UsageError && error.message.includes(BEGIN) && error.message.includes(END),
  );
});

test.run();
