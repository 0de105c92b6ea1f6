// Function sizes: the line counts of the top-level functions in the .ts files under the given folders (default src), as one
// markdown table row; class methods (and constructors, getters, setters of top-level classes) count as functions.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

interface Fn {
  file: string;
  line: number;
  name: string;
  lines: number;
  exempt: boolean;
}

const EXEMPT = '// size: data table';

function usage(message: string): never {
  console.error(`${message}\nusage: npx tsx bench/function-sizes.ts [dir…] [--list N] [--max N]`);
  process.exit(2);
}

// npx tsx bench/function-sizes.ts [dir…] [--list N] [--max N]. A function is a top-level `function` declaration with a
// body, a top-level `const x = (…) => …` or `const x = function …`, or a method, constructor or accessor of a top-level
// class; its size is end line − start line + 1, from its first token (after any comment above it) to its last.
// --list N also prints the N largest as `lines  file:line  name`; --max N exits 1 listing every function over N lines,
// except one whose preceding line is `// size: data table`.
function parseArgs(argv: string[]): { dirs: string[]; list: number; max: number | undefined } {
  const dirs: string[] = [];
  let list = 0;
  let max: number | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--list' || arg === '--max') {
      const value = Number(argv[++i]);
      if (!Number.isInteger(value) || value < 0) usage(`${arg} needs a whole number`);
      if (arg === '--list') list = value;
      else max = value;
    } else if (arg.startsWith('--')) {
      usage(`unknown flag ${arg}`);
    } else {
      dirs.push(arg);
    }
  }
  return { dirs: dirs.length > 0 ? dirs : ['src'], list, max };
}

function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules') out.push(...tsFiles(path));
    } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
      out.push(path);
    }
  }
  return out.sort();
}

function unwrap(expr: ts.Expression): ts.Expression {
  let e = expr;
  while (ts.isParenthesizedExpression(e) || ts.isAsExpression(e) || ts.isSatisfiesExpression(e)) e = e.expression;
  return e;
}

function functionsOf(path: string): Fn[] {
  const text = readFileSync(path, 'utf8');
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const lines = text.split('\n');
  const file = relative(process.cwd(), path);
  const out: Fn[] = [];
  const add = (node: ts.Node, name: string): void => {
    const start = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
    const end = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
    const before = start > 0 ? (lines[start - 1] ?? '').trim() : '';
    out.push({ file, line: start + 1, name, lines: end - start + 1, exempt: before === EXEMPT });
  };
  for (const statement of sf.statements) {
    if (ts.isFunctionDeclaration(statement)) {
      if (statement.body) add(statement, statement.name?.text ?? 'default');
    } else if (ts.isVariableStatement(statement)) {
      const declarations = statement.declarationList.declarations;
      for (const declaration of declarations) {
        if (!declaration.initializer || !ts.isIdentifier(declaration.name)) continue;
        const init = unwrap(declaration.initializer);
        if (!ts.isArrowFunction(init) && !ts.isFunctionExpression(init)) continue;
        // One declaration per statement (the usual case): measure from `const` / `export`.
        add(declarations.length === 1 ? statement : declaration, declaration.name.text);
      }
    } else if (ts.isClassDeclaration(statement)) {
      const className = statement.name?.text ?? 'default';
      for (const member of statement.members) {
        const isFunction =
          ts.isMethodDeclaration(member) || ts.isConstructorDeclaration(member) || ts.isGetAccessor(member) || ts.isSetAccessor(member);
        if (!isFunction || !member.body) continue;
        const memberName = ts.isConstructorDeclaration(member) ? 'constructor' : member.name.getText(sf);
        add(member, `${className}.${memberName}`);
      }
    }
  }
  return out;
}

function median(values: number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

function projectName(): string {
  try {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { name?: unknown };
    return typeof pkg.name === 'string' ? `${pkg.name} ` : '';
  } catch {
    return '';
  }
}

function row(fn: Fn): string {
  return `${String(fn.lines).padStart(5)}  ${fn.file}:${fn.line}  ${fn.name}`;
}

const { dirs, list, max } = parseArgs(process.argv.slice(2));
for (const dir of dirs) {
  if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory()) usage(`not a folder: ${dir}`);
}
const fns = dirs.flatMap((dir) => tsFiles(dir).flatMap(functionsOf));
const bySize = [...fns].sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file) || a.line - b.line);
const sizes = fns.map((fn) => fn.lines);
const label = `${projectName()}${dirs.map((dir) => `\`${dir.replace(/\/+$/, '')}/\``).join(', ')}`;
const largest = bySize.slice(0, 4).map((fn) => fn.lines);

console.log('| top-level functions | count | median lines | ≥ 100 lines | largest |');
console.log('|---|---:|---:|---:|---|');
console.log(`| ${label} | ${fns.length} | ${median(sizes)} | ${sizes.filter((n) => n >= 100).length} | ${largest.join(', ')} |`);

if (list > 0) {
  console.log('');
  for (const fn of bySize.slice(0, list)) console.log(row(fn));
}

if (max !== undefined) {
  const over = bySize.filter((fn) => fn.lines > max && !fn.exempt);
  if (over.length > 0) {
    console.error(`\n${over.length} function(s) over ${max} lines (mark a data table with \`${EXEMPT}\` on the line before):`);
    for (const fn of over) console.error(row(fn));
    process.exit(1);
  }
}
