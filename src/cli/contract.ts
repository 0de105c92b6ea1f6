// `npm run contract -- <base-url> [--spec <file-or-url>] [--token <t>]`: checks a running service
// against its OpenAPI document (its own /openapi.json by default); exits 1 on any mismatch.
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { checkContract, formatReport } from '../contract/checker.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { spec: { type: 'string' }, token: { type: 'string' } },
});
const base = positionals[0];
if (!base) {
  console.error('usage: npm run contract -- <base-url> [--spec <file-or-url>] [--token <bearer token>]');
  process.exit(2);
}
const source = values.spec ?? new URL('/openapi.json', base).href;
const token = values.token ?? process.env.CONTRACT_TOKEN;
const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};

try {
  const text = /^https?:/.test(source) ? await (await fetch(source, { headers })).text() : await readFile(source, 'utf8');
  const report = await checkContract(base, JSON.parse(text), {
    headers,
    onProbe: (p) => process.stderr.write(p.ok ? '.' : 'F'),
  });
  process.stderr.write('\n');
  console.log(formatReport(report));
  process.exitCode = report.failed > 0 ? 1 : 0;
} catch (error) {
  console.error(`contract: ${(error as Error).message}`);
  process.exitCode = 2;
}
