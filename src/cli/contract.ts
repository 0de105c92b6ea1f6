// `npm run contract -- <base-url> [--spec <file-or-url>] [--token <t>]`: checks a running service
// against its OpenAPI document (its own /openapi.json by default); exits 1 on any mismatch.
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { checkContract, formatReport } from '../contract/checker.js';

const USAGE = 'usage: npm run contract -- <base-url> [--spec <file-or-url>] [--token <bearer token>]';

/** The arguments, or a line saying what is wrong with them and exit code 2 (the checker cannot run). */
function readArguments(): { base: string; source: string; token: string | undefined } {
  try {
    const { values, positionals } = parseArgs({
      allowPositionals: true,
      options: { spec: { type: 'string' }, token: { type: 'string' } },
    });
    const [base, ...more] = positionals;
    if (!base || more.length > 0) throw new Error(USAGE);
    if (!/^https?:\/\//.test(base) || !URL.canParse(base)) throw new Error(`${base} is not an http:// or https:// URL; ${USAGE}`);
    return { base, source: values.spec ?? new URL('/openapi.json', base).href, token: values.token ?? process.env.CONTRACT_TOKEN };
  } catch (error) {
    console.error(`contract: ${(error as Error).message}`);
    process.exit(2);
  }
}

const { base, source, token } = readArguments();
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
  // fetch says only "fetch failed": its cause says why (ECONNREFUSED…), and the URL which server.
  const cause = (error as Error).cause as { code?: string; message?: string } | undefined;
  const why = cause ? `: ${cause.code ?? cause.message}` : '';
  console.error(`contract: ${(error as Error).message}${why} (${source === base ? base : `${base}, spec ${source}`})`);
  process.exitCode = 2;
}
