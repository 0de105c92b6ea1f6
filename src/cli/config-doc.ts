// `npm run docs:config`: writes the table of docs/configuration.md from the VARIABLES of src/config.ts,
// the one source of every variable's name, default, accepted values and meaning; the prose around it is the page's own.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { accepted, VARIABLES } from '../config.js';
import { runAsCommand, UsageError } from './usage.js';

/** The page the table is written into. */
export const PAGE = fileURLToPath(new URL('../../docs/configuration.md', import.meta.url));
/** The lines the table sits between; everything outside them is written by hand. */
export const BEGIN = '<!-- The table below is written by `npm run docs:config` from src/config.ts: edit the doc strings there. -->';
export const END = '<!-- End of the generated table. -->';

type Variable = { env: string; default: string | undefined; doc: string; schema: Parameters<typeof accepted>[0] };

/** A table cell: a `|` would end the cell, and a line break the row. */
const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');

/** The markdown table of the variables, one row each, in the order config.ts declares them. */
export function configTable(variables: Record<string, Variable> = VARIABLES): string {
  const rows = Object.values(variables).map((variable) => {
    const shown = variable.default === undefined ? 'unset' : `\`${variable.default}\``;
    return `| \`${variable.env}\` | ${shown} | ${cell(accepted(variable.schema))} | ${cell(variable.doc)} |`;
  });
  return ['| Variable | Default | Accepted | Meaning |', '|---|---|---|---|', ...rows].join('\n');
}

/**
 * The page with its table written anew between BEGIN and END.
 * @throws {UsageError} when the page lacks either marker
 */
export function renderPage(page: string, variables?: Record<string, Variable>): string {
  const start = page.indexOf(BEGIN);
  const end = page.indexOf(END);
  if (start < 0 || end < start) throw new UsageError(`docs/configuration.md must hold the lines ${BEGIN} and ${END}, in that order`);
  return `${page.slice(0, start + BEGIN.length)}\n\n${configTable(variables)}\n\n${page.slice(end)}`;
}

async function main(): Promise<number> {
  const page = readFileSync(PAGE, 'utf8');
  const written = renderPage(page);
  if (written === page) console.log('docs/configuration.md: up to date');
  else {
    writeFileSync(PAGE, written);
    console.log('docs/configuration.md: table written');
  }
  return 0;
}

await runAsCommand(import.meta.url, 'docs:config', main);
